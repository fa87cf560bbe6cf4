package web_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/web"
)

func TestReadOnly_RefusesEveryAction(t *testing.T) {
	e := newEnv(t, web.WithReadOnly(true))
	var cfg web.Config
	e.get("/api/v1/config", &cfg)
	if !cfg.ReadOnly {
		t.Errorf("config %+v, want read_only", cfg)
	}
	for _, p := range []string{"/api/v1/agents/bot/transfer", "/api/v1/agents/bot/resign", "/api/v1/doctor/fix",
		"/api/v1/queues/q/tasks/t/cancel", "/api/v1/queues/q/tasks/t/retry", "/api/v1/queues/q/keys/k/release"} {
		code, doc := e.post(p, `{"to":"x"}`, nil)
		if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(doc["error"]), "read-only") {
			t.Errorf("POST %s read-only: %d %v, want 403", p, code, doc)
		}
	}
}

func TestCrossOriginPost_IsRefused(t *testing.T) {
	e := newEnv(t)
	code, doc := e.post("/api/v1/doctor/fix", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
	if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(doc["error"]), "cross-origin") {
		t.Fatalf("cross-site POST: %d %v, want 403", code, doc)
	}
	// Without Sec-Fetch-Site (an older browser), a foreign Origin is enough.
	req, _ := http.NewRequest(http.MethodPost, e.http.URL+"/api/v1/doctor/fix", nil)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Origin POST: %d, want 403", resp.StatusCode)
	}
	if code, _ := e.post("/api/v1/doctor/fix", "", nil); code != http.StatusOK {
		t.Errorf("same-origin POST: %d, want 200", code)
	}
	resp, err = http.Get(e.http.URL + "/api/v1/doctor/fix")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d, want 405", resp.StatusCode)
	}
}

func TestToken_IsRequiredAndSetsACookie(t *testing.T) {
	e := newEnv(t, web.WithToken("s3cret"))
	get := func(path string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, e.http.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, p := range []string{"/", "/api/v1/overview", "/metrics", "/api/v1/events"} {
		if r := get(p, nil); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, r.StatusCode)
		}
	}
	if r := get("/api/v1/overview", map[string]string{"Authorization": "Bearer wrong"}); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", r.StatusCode)
	}
	if r := get("/api/v1/overview", map[string]string{"Authorization": "Bearer s3cret"}); r.StatusCode != http.StatusOK {
		t.Errorf("bearer token: %d, want 200", r.StatusCode)
	}
	r := get("/?token=s3cret", nil)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Fatalf("?token=: %d to %q, want a redirect to / (the token out of the address)", r.StatusCode, r.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range r.Cookies() {
		cookie = c
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v, want HttpOnly SameSite=Strict", cookie)
	}
	if r := get("/api/v1/overview", map[string]string{"Cookie": cookie.Name + "=" + cookie.Value}); r.StatusCode != http.StatusOK {
		t.Errorf("with the cookie: %d, want 200", r.StatusCode)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := get(p, nil); r.StatusCode != http.StatusOK {
			t.Errorf("%s without the token: %d, want 200 (probes carry no data)", p, r.StatusCode)
		}
	}
}

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ro          bool
		want        error
	}{
		{"127.0.0.1:7070", "", false, nil},
		{"[::1]:7070", "", false, nil},
		{"localhost:7070", "", false, nil},
		{"0.0.0.0:7070", "", false, web.ErrUnsafeListen},
		{":7070", "", false, web.ErrUnsafeListen},
		{"10.1.2.3:7070", "", false, web.ErrUnsafeListen},
		{"0.0.0.0:7070", "tok", false, nil},
		{"0.0.0.0:7070", "", true, nil},
		{"7070", "", false, web.ErrInvalid},
	} {
		err := web.CheckListen(c.addr, c.token, c.ro)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("CheckListen(%q, token %q, read-only %v) = %v, want %v", c.addr, c.token, c.ro, err, c.want)
		}
	}
}

func TestPage_HasSecurityHeadersAndNoInlineScript(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get(e.http.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q, want script-src 'self' and nothing unsafe", csp)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("headers %v", resp.Header)
	}
	page := string(body)
	if strings.Count(page, "<script") != 1 || !strings.Contains(page, `<script type="module" src="/assets/app.js"></script>`) {
		t.Errorf("the page must load its one script from a file, with no inline script:\n%s", page)
	}
	// app.js and the modules it imports: every script in assets/.
	scripts, err := filepath.Glob("assets/*.js")
	if err != nil || len(scripts) < 2 {
		t.Fatalf("scripts in assets/: %v, %v", scripts, err)
	}
	for _, path := range scripts {
		name := filepath.Base(path)
		js, err := http.Get(e.http.URL + "/assets/" + name)
		if err != nil {
			t.Fatal(err)
		}
		src, _ := io.ReadAll(js.Body)
		js.Body.Close()
		if js.StatusCode != http.StatusOK || !strings.Contains(js.Header.Get("Content-Type"), "javascript") {
			t.Errorf("%s: %d %q", name, js.StatusCode, js.Header.Get("Content-Type"))
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			if strings.Contains(string(src), bad) {
				t.Errorf("%s uses %s: record fields must only ever be text", name, bad)
			}
		}
	}
}
