package mongo

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// countingHandler counts the WithAttrs calls that reach it.
type countingHandler struct {
	slog.Handler
	withAttrs *int
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	*h.withAttrs++
	return countingHandler{h.Handler.WithAttrs(as), h.withAttrs}
}

// TestMinLevel_FormatsAttributesOnlyForRecordsItPasses: the engine's
// logger gets attributes for every statement; only a record at the level
// pays for them.
func TestMinLevel_FormatsAttributesOnlyForRecordsItPasses(t *testing.T) {
	var out bytes.Buffer
	n := 0
	log := slog.New(minLevel{handler: countingHandler{slog.NewJSONHandler(&out, nil), &n}, level: slog.LevelError})
	for range 100 {
		log.With("doc", strings.Repeat("x", 1000)).WithGroup("q").Debug("statement")
	}
	if n != 0 || out.Len() != 0 {
		t.Fatalf("100 loggers with attributes below the level: %d WithAttrs calls reached the handler, %d bytes written; want 0 and 0", n, out.Len())
	}
	log.With("table", "users").WithGroup("q").ErrorContext(context.Background(), "failed", "code", 13)
	if got := out.String(); !strings.Contains(got, `"table":"users"`) || !strings.Contains(got, `"q":{"code":13}`) {
		t.Errorf("error record = %s, want its attributes and group", got)
	}
}
