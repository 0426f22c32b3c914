package audit

// Refusals is how many refusals the auditor recorded (repeats too), for
// realmfs status; 0 for a nil Auditor.
func (a *Auditor) Refusals() uint64 {
	if a == nil {
		return 0
	}
	return a.refusals.Load()
}
