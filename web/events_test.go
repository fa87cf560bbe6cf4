package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/web"
)

// sse reads a server-sent event stream.
type sse struct {
	resp *http.Response
	r    *bufio.Reader
}

func openEvents(t *testing.T, url string) *sse {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sse{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the next event's name and data.
func (s *sse) next() (string, string, error) {
	var name, data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data, nil
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
}

func TestEvents_SendTheChangeNotTheTable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.m.Join(ctx, "before", "t0"); err != nil {
		t.Fatal(err)
	}
	var page web.SessionPage
	eventually(t, "the first session seen", func() bool { e.get("/api/v1/sessions", &page); return page.Total == 1 })
	es := openEvents(t, e.http.URL+"/api/v1/events?kinds=session")
	if name, _, err := es.next(); err != nil || name != "hello" {
		t.Fatalf("first event %q %v, want hello", name, err)
	}
	s, err := e.m.Join(ctx, "s1", "t1")
	if err != nil {
		t.Fatal(err)
	}
	// The join is sent, as the row status --json prints, and only it.
	find := func(op string) web.EventChange {
		t.Helper()
		for {
			name, data, err := es.next()
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			if name != "changes" {
				continue
			}
			var b web.Batch
			if err := json.Unmarshal([]byte(data), &b); err != nil {
				t.Fatal(err)
			}
			for _, c := range b.Changes {
				if c.Kind != web.KindSession || c.Key == "before" {
					t.Fatalf("unexpected change %+v: only s1 changed, and only sessions were asked for", c)
				}
				if c.Op == op {
					return c
				}
			}
		}
	}
	put := find("put")
	doc, _ := put.Doc.(map[string]any)
	if put.Key != "s1" || doc["task_id"] != "t1" || doc["state"] != "live" {
		t.Errorf("join sent as %+v", put)
	}
	if err := e.m.Close(ctx, s, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	if del := find("delete"); del.Key != "s1" || del.Doc != nil {
		t.Errorf("close sent as %+v", del)
	}
	var apiErr web.APIError
	if code := e.get("/api/v1/events?kinds=nope", &apiErr); code != http.StatusBadRequest {
		t.Errorf("unknown kind: %d, want 400", code)
	}
}
