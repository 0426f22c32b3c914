package policy

// Verdict is what a policy does with one workspace path, and by which
// rule of which source (realmfs explain): off the hot path, each glob is
// tried on its own, with the same matching the Matcher's sets use.
type Verdict struct {
	Path string
	// Credential: the deny glob that makes the path a credential (the
	// first in --show-policy's order); nil if none, or if Allowed.
	Credential *Rule
	// Allowed: the allow glob that keeps a path a deny glob matches
	// (DeniedBy) out of the credential set.
	Allowed, DeniedBy *Rule
	// Hidden: a credential lookups answer ENOENT for (credentials.hide).
	Hidden bool
	// Protected: the protect glob that makes the path protected; nil if
	// none, or if ProtectExempt names the exception that lifts it.
	Protected, ProtectExempt, ProtectedBy *Rule
	// Coordinated: the glob that makes the path coordinated (written in
	// place, shared by every owner).
	Coordinated *Rule
}

// Explain says what p (nil: the built-in policy) does with rel, a
// workspace path (slash-separated, no leading slash; "" the root).
func (p *Policy) Explain(rel string) Verdict {
	if p == nil {
		p = Default()
	}
	v := Verdict{Path: rel}
	if rel == "" {
		return v
	}
	v.DeniedBy = firstMatch(denyRules(p), rel, true)
	if v.DeniedBy != nil {
		v.Allowed = firstMatch(allowRules(p), rel, false)
		if v.Allowed == nil {
			v.Credential, v.Hidden = v.DeniedBy, p.Credentials.Hide
		}
	}
	v.ProtectedBy = firstMatch(protectRules(p), rel, true)
	if v.ProtectedBy != nil {
		v.ProtectExempt = firstMatch(protectExceptions(p), rel, false)
		if v.ProtectExempt == nil {
			v.Protected = v.ProtectedBy
		}
	}
	v.Coordinated = firstMatch(coordinatedRules(p), rel, false)
	return v
}

// firstMatch is the first of rules whose glob matches rel: folded (as
// deny and protect globs match: Matcher.Denied), or as written.
func firstMatch(rules []Rule, rel string, folded bool) *Rule {
	for i := range rules {
		var s, asWritten globSet
		if folded {
			fileDeny(&s, &asWritten, rules[i].Glob)
			if denies(&s, &asWritten, rel) {
				return &rules[i]
			}
			continue
		}
		if checkGlob(rules[i].Glob) == nil && s.add(rules[i].Glob) && s.match(rel) {
			return &rules[i]
		}
	}
	return nil
}

// sourced pairs globs with where each was written ("policy" where not
// known).
func sourced(globs, sources []string) []Rule {
	out := make([]Rule, len(globs))
	for i, g := range globs {
		out[i] = Rule{Glob: g, Source: "policy"}
		if i < len(sources) {
			out[i].Source = sources[i]
		}
	}
	return out
}

// builtins is a built-in set as rules.
func builtins(on bool, globs []Glob) []Rule {
	if !on {
		return nil
	}
	out := make([]Rule, len(globs))
	for i, g := range globs {
		out[i] = Rule{Glob: g.Pattern, Source: "built-in: " + g.Source}
	}
	return out
}

func denyRules(p *Policy) []Rule {
	return append(builtins(p.Credentials.Defaults, DefaultCredentialGlobs), sourced(p.Credentials.Deny, p.Credentials.DenySources)...)
}

func allowRules(p *Policy) []Rule {
	return append(builtins(p.Credentials.Defaults, DefaultPublicGlobs), sourced(p.Credentials.Allow, p.Credentials.AllowSources)...)
}

func protectRules(p *Policy) []Rule {
	return append(builtins(p.Protect.Defaults, DefaultProtectGlobs), sourced(p.Protect.Paths, p.Protect.PathSources)...)
}

func protectExceptions(p *Policy) []Rule {
	return append(builtins(p.Protect.Defaults, DefaultProtectExceptions), sourced(p.Protect.Allow, p.Protect.AllowSources)...)
}

func coordinatedRules(p *Policy) []Rule {
	return append(builtins(p.Coordinated.Defaults, DefaultCoordinatedGlobs), sourced(p.Coordinated.Paths, p.Coordinated.PathSources)...)
}
