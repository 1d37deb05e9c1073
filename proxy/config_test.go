package proxy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{WorkerID: "w"}.WithDefaults()
	require.NoError(t, Config{WorkerID: "w"}.Validate())
	require.Equal(t, DefaultProxyAddr, c.ProxyAddr)
	require.Equal(t, 0.01, c.Drift)
	require.Equal(t, 200*time.Millisecond, c.MarginFloor)
	require.Equal(t, ReadsAllow, c.ReadsWithoutLease)
	require.NotNil(t, c.Logger)
	require.NotNil(t, c.Clock)
}

func TestConfigValidate(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"workerId":          func(c *Config) { c.WorkerID = "" },
		"proxyAddr":         func(c *Config) { c.ProxyAddr = "0.0.0.0:4780" },
		"controlAddr":       func(c *Config) { c.ControlAddr = "10.0.0.1:1" },
		"drift":             func(c *Config) { c.Drift = 0.7 },
		"marginFloor":       func(c *Config) { c.MarginFloor = -time.Second },
		"readsWithoutLease": func(c *Config) { c.ReadsWithoutLease = "maybe" },
		"maxHeaderBytes":    func(c *Config) { c.MaxHeaderBytes = 10 },
		"writeRules[0]":     func(c *Config) { c.WriteRules = []WriteRule{{}} },
		"pathPrefix":        func(c *Config) { c.WriteRules = []WriteRule{{PathPrefix: "x"}} },
		"methods":           func(c *Config) { c.WriteRules = []WriteRule{{Methods: []string{"PO ST"}}} },
		"tls.originate[0]":  func(c *Config) { c.TLSOriginate = []TLSOrigin{{Host: ""}} },
		"caFile":            func(c *Config) { c.TLSOriginate = []TLSOrigin{{Host: "a", CAFile: "/no/such"}} },
		"connect.allow[0]":  func(c *Config) { c.ConnectAllow = []string{"nohost"} },
		"task":              func(c *Config) { c.Task = "bad\ntask" },
	} {
		c := Config{WorkerID: "w"}
		mut(&c)
		err := c.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, name)
		require.Contains(t, err.Error(), name)
	}
	require.NoError(t, Config{WorkerID: "w", ProxyAddr: "[::1]:1", ControlAddr: "localhost:2"}.Validate())
}
