package openaiapi

import (
	"slices"
	"strings"
	"testing"
)

// nameLists are every list a nameTable is built from: the member sets and
// the interned names.
func nameLists() map[string][]string {
	lists := map[string][]string{"interned": internedNames[:]}
	for name, s := range map[string]*memberSet{
		"chat": chatMembers, "completion": completionMembers, "embedding": embeddingMembers,
		"responses": responsesMembers, "stream_options": streamOptionMembers, "message": messageMembers,
		"content part": contentPartMembers, "tool": toolMembers, "tool function": toolFunctionMembers,
		"tool_choice": toolChoiceMembers, "tool_choice function": choiceFunctionMember,
	} {
		lists[name] = s.names
	}
	return lists
}

// nearNames are keys a table must not take for one of its names: every
// name's prefixes and extensions, its case variants, and each one-byte
// change of it, plus every other list's names.
func nearNames(lists map[string][]string) []string {
	var keys []string
	for _, names := range lists {
		for _, n := range names {
			keys = append(keys, n, strings.ToUpper(n), n[:len(n)-1], n+"s", "x"+n, n[1:], " "+n, n+"\x00")
			for i := range len(n) {
				b := []byte(n)
				b[i] ^= 0x20
				keys = append(keys, string(b))
				b[i] ^= 0x21
				keys = append(keys, string(b))
			}
		}
	}
	return append(keys, "", "\x80", "ſtream", "\u212aey")
}

// A table finds each of its names at its position and nothing else:
// find and findBytes agree with a linear search of the list on every
// name of every list and on keys one change away from one.
func TestNameTablesFindExactlyTheirNames(t *testing.T) {
	lists := nameLists()
	keys := nearNames(lists)
	for list, names := range lists {
		tab := newNameTable(names)
		for _, k := range keys {
			want := slices.Index(names, k)
			if got := tab.find(k); got != want {
				t.Errorf("%s: find(%q) = %d, want %d", list, k, got, want)
			}
			if got := tab.findBytes([]byte(k)); got != want {
				t.Errorf("%s: findBytes(%q) = %d, want %d", list, k, got, want)
			}
		}
	}
}

// FuzzNameTable holds find to a linear search of the chat members and
// the interned names, for any key.
func FuzzNameTable(f *testing.F) {
	for _, k := range nearNames(nameLists())[:200] {
		f.Add(k)
	}
	tabs := map[*nameTable][]string{chatMembers.table: chatMembers.names, internTable: internedNames[:]}
	f.Fuzz(func(t *testing.T, k string) {
		for tab, names := range tabs {
			want := slices.Index(names, k)
			if got := tab.find(k); got != want {
				t.Fatalf("find(%q) = %d, want %d", k, got, want)
			}
			if got := tab.findBytes([]byte(k)); got != want {
				t.Fatalf("findBytes(%q) = %d, want %d", k, got, want)
			}
		}
	})
}

// Building a table refuses what it cannot hold: a name twice, an empty
// name. An empty list finds nothing.
func TestNameTableRefusesBadLists(t *testing.T) {
	for _, names := range [][]string{{"a", "b", "a"}, {"a", ""}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("newNameTable(%q) did not panic", names)
				}
			}()
			newNameTable(names)
		}()
	}
	if got := newNameTable(nil).find("a"); got != -1 {
		t.Fatalf("empty table found %d", got)
	}
}

// Reading a name the object was not read by is the package's bug, and
// says so, rather than reading as absent.
func TestFieldsGetOfAnotherSetsNamePanics(t *testing.T) {
	var f fields
	if _, ok := f.read([]byte(`{"include_usage":true}`), streamOptionMembers); !ok {
		t.Fatal("not read")
	}
	if string(f.get("include_usage")) != "true" {
		t.Fatalf("include_usage = %q", f.get("include_usage"))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("get of a name outside the set did not panic")
		}
	}()
	f.get("model")
}

// skipStringModel is where a string literal opened at i ends, read byte
// by byte as JSON defines an escape (a backslash takes the byte after
// it): the model FuzzSkipString holds skipString's quote search and its
// word-at-a-time start to.
func skipStringModel(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// FuzzSkipString: where a string literal ends, for any bytes after its
// opening quote (escapes, quotes and backslashes within and past the
// first two words included), is what the plain search finds.
func FuzzSkipString(f *testing.F) {
	for _, s := range []string{`"a"`, `"abcdefgh"`, `"abcdefg\"h"`, `"abcdefghijklmnop"rest"`, `"\\\\"`,
		`"abcdefghijklmno\\"x"`, `"abc`, `"abcdefgh\`, `"` + strings.Repeat("x", 40) + `"`, `""`, `"\\\"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		for i := range min(len(b), 3) {
			if got, want := skipString(b, i), skipStringModel(b, i); got != want {
				t.Fatalf("skipString(%q, %d) = %d, want %d", b, i, got, want)
			}
		}
	})
}
