package main

import "syscall"

// umask sets the process's umask and returns the old one.
func umask(mask int) int { return syscall.Umask(mask) }
