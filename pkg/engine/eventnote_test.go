package engine

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A note over the API server's limit is cut to it on a UTF-8 boundary and marked; one that
// fits is left alone.
func TestFitNote(t *testing.T) {
	for _, c := range []struct {
		name string
		note string
	}{
		{"short", "the master completed successfully"},
		{"exactly the limit", strings.Repeat("a", NoteLimit)},
		{"a traceback of 4 KiB", strings.Repeat("Traceback line\n", 300)},
		{"multi-byte runes across the cut", strings.Repeat("é", NoteLimit)},
		{"4-byte runes across the cut", strings.Repeat("𝛼", NoteLimit)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := fitNote(c.note)
			if len(got) > NoteLimit || !utf8.ValidString(got) {
				t.Fatalf("%d bytes, valid UTF-8 %t: want at most %d, valid", len(got), utf8.ValidString(got), NoteLimit)
			}
			if len(c.note) <= NoteLimit && got != c.note {
				t.Errorf("a note that fits was changed")
			}
			if len(c.note) > NoteLimit && (!strings.HasSuffix(got, noteCut) || !strings.HasPrefix(c.note, strings.TrimSuffix(got, noteCut))) {
				t.Errorf("cut note %q... is not the note's start marked as cut", got[:40])
			}
		})
	}
}
