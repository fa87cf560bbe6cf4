package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/rate"
)

func TestRates_TakeUntilLimitedAndStatus(t *testing.T) {
	e := newEnv(t, kvtest.StartServer(t))
	if _, err := e.conn.Limiters.Create(context.Background(), "llm", []rate.Limit{{Max: 2, Period: rate.Duration(time.Minute), Per: rate.PerTake}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if text, isErr := e.call(t, "take_rate", map[string]any{"name": "llm"}); isErr || !strings.Contains(text, "admitted") {
			t.Fatalf("take %d: %s", i, text)
		}
	}
	text, isErr := e.call(t, "take_rate", map[string]any{"name": "llm"})
	if !isErr || !strings.Contains(text, "do not make it") {
		t.Fatalf("the third take of 2/1m: %s (error %v); want refused", text, isErr)
	}
	if text, isErr := e.call(t, "take_rate", map[string]any{"name": "nope"}); !isErr || !strings.Contains(text, "baton rate create nope") {
		t.Fatalf("take of no limiter: %s", text)
	}
	if text, isErr := e.call(t, "rate_status", map[string]any{"name": "llm"}); isErr || !strings.Contains(text, "used 2, left 0") {
		t.Fatalf("rate_status: %s", text)
	}
}
