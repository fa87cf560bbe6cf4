package web

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// cookieName holds the token in a browser that came with ?token=.
const cookieName = "baton_ui_token"

// csp allows scripts, styles and connections from the dashboard only, and
// no inline script: a record field that slipped into the page as markup
// still could not run.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// secure puts the security headers on every answer, checks the token and
// refuses state-changing requests from other origins.
func (s *Server) secure(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("cross-origin request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		writeJSON(w, http.StatusForbidden, APIError{Error: "web: cross-origin request refused: act from the dashboard's own page", Code: 2})
	}))
	inner := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if s.token != "" && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
			if !s.authorize(w, r) {
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
}

// authorize checks the token: a bearer header, the cookie, or ?token= on a
// page load, which sets the cookie and redirects to the same page without
// the token in its address.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenIs(tok) {
		return true
	}
	if c, err := r.Cookie(cookieName); err == nil && s.tokenIs(c.Value) {
		return true
	}
	if q := r.URL.Query(); r.Method == http.MethodGet && q.Has("token") && s.tokenIs(q.Get("token")) {
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: q.Get("token"), Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		q.Del("token")
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	s.log.Warn("request without the token refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	if strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
		writeError(w, fmt.Errorf("%w: send \"Authorization: Bearer TOKEN\", or open the address baton ui printed", ErrUnauthorized))
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("This baton dashboard needs its token: open the address `baton ui` printed (it ends in ?token=...).\n"))
	return false
}

func (s *Server) tokenIs(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}
