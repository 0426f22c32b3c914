package journal

// writeThroughOps are the ops whose intents record the making of an empty
// object: written through, not flushed, where the filesystem's fsyncs
// flush (package logsync, Policy.Through).
var writeThroughOps = map[Op]bool{OpCreate: true, OpMkdir: true}
