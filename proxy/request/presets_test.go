package request

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPresetsMakeInferenceAReadAndNothingElse(t *testing.T) {
	rules := normalizeRules(presetRules(PresetNames()))
	tgt := func(host, path string) target {
		return target{host: host, hostPort: host + ":443", rawPath: path, normPath: path}
	}
	for _, c := range []struct {
		host, method, path string
		write              bool
	}{
		{"api.openai.com", "POST", "/v1/chat/completions", false},
		{"api.openai.com", "POST", "/v1/responses", false},
		{"api.openai.com", "POST", "/v1/embeddings", false},
		{"api.openai.com", "POST", "/v1/files", true},
		{"api.openai.com", "POST", "/v1/fine_tuning/jobs", true},
		{"api.openai.com", "DELETE", "/v1/responses/resp_1", true},
		{"api.anthropic.com", "POST", "/v1/messages", false},
		{"api.anthropic.com", "POST", "/v1/messages/batches", true},
		{"api.anthropic.com", "POST", "/v1/messages/count_tokens", false},
		{"api.openai.com", "POST", "/v1/responses/resp_1/cancel", true},
		{"api.openai.com", "POST", "/v1/chat/completions/cc_1", true},
		{"api.anthropic.com", "POST", "/v1/files", true},
		{"generativelanguage.googleapis.com", "POST", "/v1beta/models/gemini-2.5-pro:generateContent", false},
		{"generativelanguage.googleapis.com", "POST", "/v1beta/tunedModels", true},
		{"res.openai.azure.com", "POST", "/openai/deployments/gpt/chat/completions", false},
		{"api.mistral.ai", "POST", "/v1/chat/completions", false},
		{"api.mistral.ai", "POST", "/v1/files", true},
		{"127.0.0.1", "POST", "/v1/chat/completions", false},
		{"localhost", "POST", "/api/generate", false},
		{"evil.example", "POST", "/v1/chat/completions", true},
	} {
		require.Equal(t, c.write, isWrite(rules, c.method, tgt(c.host, c.path)), "%s %s%s", c.method, c.host, c.path)
	}
	// A path that only normalises to an inference route stays a write.
	tr := target{host: "api.openai.com", hostPort: "api.openai.com:443", rawPath: "/v1/files/../chat/completions", normPath: "/v1/chat/completions"}
	require.True(t, isWrite(rules, "POST", tr))
}
