package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The access rules every request passes before a page (DESIGN.md 15):
//
//   - Host must be one this console serves under (the listen address,
//     "localhost" on loopback, Config.Hosts): a page of another origin
//     whose name was re-pointed at 127.0.0.1 (DNS rebinding) is refused.
//   - Every answer carries a strict Content-Security-Policy: scripts,
//     styles and connections only from the console itself, no inline
//     script, no framing.
//   - A state-changing request (POST) carries the per-process CSRF token
//     twice: in a SameSite=Strict cookie and in a form field or header.
//     Another site can make the browser send the cookie only within
//     SameSite rules, and can never read the token to echo it.
//   - With a login token configured, every page but the login form wants
//     the session cookie that the token bought.

const (
	csrfCookie    = "fp_csrf"
	csrfField     = "csrf"
	csrfHeader    = "X-CSRF-Token"
	sessionCookie = "fp_session"
	loginPath     = "/login"
	staticPrefix  = "/static/"
)

// csp is the Content-Security-Policy of every answer.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// randomToken returns 32 random bytes in hex.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// guard holds the per-process secrets and the allowed hosts.
type guard struct {
	hosts   map[string]bool
	csrf    string
	session string // the cookie value a login buys; "" without a token
	token   string
	secure  bool // cookies only over TLS
}

func newGuard(listenAddr string, extra []string, token string, secure bool) *guard {
	g := &guard{hosts: map[string]bool{}, csrf: randomToken(), token: token, secure: secure}
	if token != "" {
		g.session = randomToken()
	}
	host, port, _ := net.SplitHostPort(listenAddr)
	g.hosts[strings.ToLower(listenAddr)] = true
	if IsLoopback(host) {
		for _, h := range []string{"localhost", "127.0.0.1", "[::1]"} {
			g.hosts[h+":"+port] = true
		}
	}
	for _, h := range extra {
		h = strings.ToLower(h)
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, port)
		}
		g.hosts[h] = true
	}
	return g
}

// wrap applies the rules to next.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !g.hosts[strings.ToLower(r.Host)] {
			http.Error(w, "console: unknown Host header (only the console's own address is served)", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !g.sameOrigin(r) {
			http.Error(w, "console: cross-origin request refused", http.StatusForbidden)
			return
		}
		if r.URL.Path == loginPath {
			g.login(w, r)
			return
		}
		if g.session != "" && !strings.HasPrefix(r.URL.Path, staticPrefix) && !g.loggedIn(r) {
			http.Redirect(w, r, loginPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !g.csrfOK(r) {
			http.Error(w, "console: missing or wrong CSRF token (reload the page)", http.StatusForbidden)
			return
		}
		g.setCSRFCookie(w, r)
		next.ServeHTTP(w, r)
	})
}

// sameOrigin refuses a request whose Origin names another site; browsers
// send Origin on every POST, so a forged form from elsewhere stops here
// even before the CSRF check.
func (g *guard) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && g.hosts[strings.ToLower(u.Host)]
}

func (g *guard) csrfOK(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !equal(c.Value, g.csrf) {
		return false
	}
	v := r.Header.Get(csrfHeader)
	if v == "" {
		v = r.PostFormValue(csrfField)
	}
	return equal(v, g.csrf)
}

func (g *guard) setCSRFCookie(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(csrfCookie); err == nil && equal(c.Value, g.csrf) {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: g.csrf, Path: "/", HttpOnly: true,
		Secure: g.secure, SameSite: http.SameSiteStrictMode})
}

func (g *guard) loggedIn(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	return err == nil && equal(c.Value, g.session)
}

// login serves the token form and trades a right token for the session
// cookie. Without a configured token there is nothing to log into.
func (g *guard) login(w http.ResponseWriter, r *http.Request) {
	next := r.FormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		next = "/"
	}
	if g.session == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	g.setCSRFCookie(w, r)
	if r.Method == http.MethodPost {
		if !g.csrfOK(r) {
			http.Error(w, "console: missing or wrong CSRF token (reload the page)", http.StatusForbidden)
			return
		}
		if equal(r.PostFormValue("token"), g.token) {
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: g.session, Path: "/", HttpOnly: true,
				Secure: g.secure, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}
	renderLogin(w, g.csrf, next, r.Method == http.MethodPost)
}

// equal compares secrets in constant time.
func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
