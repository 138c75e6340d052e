package ollama

import "strings"

// Ollama's defaults for the parts a model name leaves out (its
// types/model.DefaultName): "gemma" is registry.ollama.ai/library/gemma:latest.
const (
	defaultModelHost      = "registry.ollama.ai"
	defaultModelNamespace = "library"
	defaultModelTag       = "latest"
)

// modelKey is the name under which what Ollama says about model is
// remembered: the shortest form of the host/namespace/model:tag Ollama
// resolves it to (its DisplayShortest: the default host, then the default
// namespace, left out; the tag always there), so that "gemma",
// "gemma:latest", "library/gemma" and
// "registry.ollama.ai/library/gemma:latest" share one lookup. It follows
// Ollama's ParseName: a tag is what follows the last ":" when that ":"
// comes after the last "/" (so "host:5000/ns/model" has a port, not a
// tag), and a missing host, namespace or tag takes the default. A name
// with its tag is its own key or a suffix of it, without an allocation.
//
// Only forms every Ollama version reads alike are folded; anything else
// is its own key, as written: a digest ("@"), a scheme ("://"), four or
// more parts, a middle part newer Ollamas read as a kind ("skill",
// "agent", "mcp", in any case), an empty or invalid part. No such name
// equals a folded key of another name, whose parts are all valid. A name
// kept as written costs at most one lookup more, never another model's
// answer.
//
// Case is folded (ASCII, the only letters a valid part has): since 0.5.2
// Ollama finds a model whatever the case of its name (/api/show, /api/chat,
// /api/generate and /api/embed resolve it through getExistingName, each
// part compared with strings.EqualFold, ollama #8017), and pull, create and
// copy keep one spelling per name (#7676), so "Gemma" and "gemma" are one
// model. An older Ollama on a case-sensitive disk answers 404 for a
// spelling it does not have; that request fails whichever form it took,
// and the 404's native answer shared with the right spelling costs that
// one a refused native request (then remembered) at most. The key is a
// substring of model, without an allocation, when model has its tag and
// no upper-case letter.
func modelKey(model string) string {
	if strings.Contains(model, "@") || strings.Contains(model, "://") {
		return model
	}
	rest, tag := model, ""
	if i := strings.LastIndexByte(model, ':'); i > strings.LastIndexByte(model, '/') {
		rest, tag = model[:i], model[i+1:]
		if !validNamePart(tag, 80, ".") {
			return model
		}
	}
	host, ns, name := defaultModelHost, defaultModelNamespace, rest
	start := 0 // where the key begins in model: past the defaults written out
	switch strings.Count(rest, "/") {
	case 0:
	case 1:
		ns, name, _ = strings.Cut(rest, "/")
		if strings.EqualFold(ns, defaultModelNamespace) {
			start = len(ns) + 1
		}
	case 2:
		var mid string
		host, mid, _ = strings.Cut(rest, "/")
		ns, name, _ = strings.Cut(mid, "/")
		if isModelKind(ns) {
			return model
		}
		if strings.EqualFold(host, defaultModelHost) {
			start = len(host) + 1
			if strings.EqualFold(ns, defaultModelNamespace) {
				start += len(ns) + 1
			}
		}
	default:
		return model
	}
	if !validNamePart(host, 350, ".:") || !validNamePart(ns, 80, "") || !validNamePart(name, 80, ".") {
		return model
	}
	if tag == "" {
		return foldKey(model[start:], ":"+defaultModelTag)
	}
	return foldKey(model[start:], "")
}

// foldKey is s in lower case (ASCII) followed by suffix: s itself, without
// an allocation, when there is no suffix and nothing to fold.
func foldKey(s, suffix string) string {
	upper := strings.IndexFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	if upper < 0 && suffix == "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(suffix))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	b.WriteString(suffix)
	return b.String()
}

// isModelKind reports whether a middle part is one newer Ollamas read as a
// kind (namespace/kind/model) where older ones read host/namespace/model;
// in any case, so that no spelling of such a name is folded.
func isModelKind(part string) bool {
	return strings.EqualFold(part, "skill") || strings.EqualFold(part, "agent") || strings.EqualFold(part, "mcp")
}

// validNamePart reports whether s is a valid part of an Ollama name: 1 to
// maxLen bytes, a letter, digit or "_" first, then letters, digits, "_", "-"
// and the extra characters the part allows ("." for a model or tag, "."
// and ":" for a host).
func validNamePart(s string, maxLen int, extra string) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case i > 0 && (c == '-' || strings.IndexByte(extra, c) >= 0):
		default:
			return false
		}
	}
	return true
}
