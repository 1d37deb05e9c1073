package console

import (
	"crypto/tls"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
	"github.com/stretchr/testify/require"
)

var csrfAttr = regexp.MustCompile(`data-csrf="([0-9a-f]+)"`)

// csrfOf loads a page and returns the token the page carries.
func csrfOf(t *testing.T, c *http.Client, s *Server) string {
	t.Helper()
	status, body := get(t, c, s, "/tasks")
	require.Equal(t, http.StatusOK, status, body)
	m := csrfAttr.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	return m[1]
}

func TestGuardRefusesForeignHostsAndSendsACSP(t *testing.T) {
	s := startConsole(t, newFakeCluster())
	c := browser(t)
	for _, host := range []string{"evil.example", "evil.example:" + strings.Split(s.Addr(), ":")[1], "127.0.0.2:1"} {
		req, err := http.NewRequest(http.MethodGet, s.URL()+"tasks", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := c.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "Host %s (DNS rebinding)", host)
	}
	port := strings.Split(s.Addr(), ":")[1]
	for _, host := range []string{s.Addr(), "localhost:" + port} {
		req, err := http.NewRequest(http.MethodGet, s.URL()+"tasks", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := c.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, host)
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'none'")
		require.Contains(t, csp, "script-src 'self'")
		require.NotContains(t, csp, "unsafe-inline")
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	}
}

func TestGuardWantsTheCSRFTokenInCookieAndForm(t *testing.T) {
	f := newFakeCluster()
	epoch := f.acquire(t, "w1", "t1")
	s := startConsole(t, f)
	form := url.Values{"epoch": {itoa(epoch)}, "confirm": {"yes"}}

	status, _ := post(t, browser(t), s, "/tasks/t1/revoke", form)
	require.Equal(t, http.StatusForbidden, status, "no cookie, no token")

	c := browser(t)
	token := csrfOf(t, c, s)
	status, _ = post(t, c, s, "/tasks/t1/revoke", form)
	require.Equal(t, http.StatusForbidden, status, "the cookie alone is what another site could make a browser send")
	bad := url.Values{"epoch": {itoa(epoch)}, "confirm": {"yes"}, "csrf": {strings.Repeat("0", 64)}}
	status, _ = post(t, c, s, "/tasks/t1/revoke", bad)
	require.Equal(t, http.StatusForbidden, status, "a wrong token")
	withToken := url.Values{"epoch": {itoa(epoch)}, "confirm": {"yes"}, "csrf": {token}}
	status, _ = post(t, c, s, "/tasks/t1/revoke", withToken, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, status, "a POST from another origin")
	require.Empty(t, f.revokes, "nothing reached the cluster")

	status, _ = post(t, c, s, "/tasks/t1/revoke", withToken, "Origin", strings.TrimSuffix(s.URL(), "/"))
	require.Equal(t, http.StatusSeeOther, status)
	require.Len(t, f.revokes, 1)
}

func TestGuardLoginTokenBuysASessionCookie(t *testing.T) {
	s := startConsole(t, newFakeCluster(), func(c *Config) { c.Token = "a-long-enough-token-1234" })
	c := browser(t)
	status, _ := get(t, c, s, "/tasks")
	require.Equal(t, http.StatusSeeOther, status, "to the login form")
	status, body := get(t, c, s, "/login?next=/workers")
	require.Equal(t, http.StatusOK, status)
	token := csrfAttr.FindStringSubmatch(body)[1]
	status, _ = post(t, c, s, "/login", url.Values{"csrf": {token}, "token": {"wrong"}, "next": {"/workers"}})
	require.Equal(t, http.StatusUnauthorized, status)
	status, _ = get(t, c, s, "/tasks")
	require.Equal(t, http.StatusSeeOther, status)
	status, _ = post(t, c, s, "/login", url.Values{"csrf": {token}, "token": {"a-long-enough-token-1234"}, "next": {"//evil.example/"}})
	require.Equal(t, http.StatusSeeOther, status)
	status, _ = get(t, c, s, "/tasks")
	require.Equal(t, http.StatusOK, status)
	status, _ = get(t, browser(t), s, "/static/style.css")
	require.Equal(t, http.StatusOK, status, "the login page's style needs no login")
}

func TestConfigRefusesAnExposedConsoleWithoutTokenOrTLS(t *testing.T) {
	f := newFakeCluster()
	for _, tc := range []struct {
		cfg  Config
		want error
	}{
		{Config{Listen: "0.0.0.0:7470", Cluster: f}, ErrExposedWithoutToken},
		{Config{Listen: ":7470", Cluster: f, Token: "x"}, ErrExposedWithoutTLS},
		{Config{Listen: "10.1.2.3:7470", Cluster: f, Token: "x"}, ErrExposedWithoutTLS},
		{Config{Listen: "nonsense", Cluster: f}, ErrBadListen},
		{Config{}, ErrNoCluster},
	} {
		require.ErrorIs(t, tc.cfg.Validate(), tc.want, "%+v", tc.cfg.Listen)
	}
	ok := Config{Listen: "0.0.0.0:7470", Cluster: f, Token: "x", TLS: &tls.Config{}}
	require.NoError(t, ok.Validate())
	require.NoError(t, (&Config{Listen: "[::1]:0", Cluster: f}).Validate())
	require.NoError(t, (&Config{Cluster: f}).Validate(), "the default is loopback")
}

// An HTTPS console sets its cookies Secure, so a browser never sends the
// session or CSRF cookie over plain HTTP.
func TestHTTPSConsoleSetsSecureCookies(t *testing.T) {
	kit := pkitest.New(t, "console CA")
	serverTLS := kit.Source(pki.RoleService, "localhost").ServerConfig(tls.NoClientCert)
	s := startConsole(t, newFakeCluster(), func(c *Config) { c.TLS = serverTLS; c.Token = "a-long-enough-token-1234" })
	require.True(t, strings.HasPrefix(s.URL(), "https://"), s.URL())
	c := browser(t)
	c.Transport = &http.Transport{TLSClientConfig: kit.Client(pki.RoleReader, "browser")}
	resp, err := c.Get(s.URL() + "login")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cookies := resp.Cookies()
	require.NotEmpty(t, cookies)
	for _, ck := range cookies {
		require.True(t, ck.Secure, ck.Name)
		require.True(t, ck.HttpOnly, ck.Name)
		require.Equal(t, http.SameSiteStrictMode, ck.SameSite, ck.Name)
	}
}
