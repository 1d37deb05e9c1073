package request

import (
	"slices"
	"sort"
)

// Presets are named, opt-in rule sets (Settings.WritePresets) for
// well-known model APIs. Each marks the API's inference endpoints (chat
// and text completions, responses, messages, embeddings, token counts,
// moderation) as reads: calling a model changes nothing in the world, so
// a worker whose lease lapsed may still finish a thought, while every
// other request to the same API (files, fine-tuning, batches,
// assistants, vector stores, deletes) stays a write and is blocked. A
// read rule matches only when both the raw and the normalised path start
// with its prefix, so no path trick turns a write into a read.
var Presets = map[string][]WriteRule{
	// OpenAI: api.openai.com.
	// Stored objects below an inference route (updating a stored chat
	// completion, cancelling a background response) stay writes.
	"openai": slices.Concat(
		writes("api.openai.com", "/v1/chat/completions/", "/v1/responses/"),
		inference("api.openai.com", "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/v1/moderations")),
	// Anthropic: api.anthropic.com (Messages, token counting, legacy
	// Text Completions). Message batches are jobs: writes.
	"anthropic": slices.Concat(
		writes("api.anthropic.com", "/v1/messages/batches"),
		inference("api.anthropic.com", "/v1/messages", "/v1/complete")),
	// Google Gemini API: generativelanguage.googleapis.com. Under
	// /models/ POST only invokes a model (generateContent,
	// streamGenerateContent, embedContent, countTokens); tuned models,
	// files and caches live elsewhere.
	"google": inference("generativelanguage.googleapis.com",
		"/v1beta/models/", "/v1/models/"),
	// Azure OpenAI: <resource>.openai.azure.com data plane, deployment
	// and v1 routes. Deployments are managed through Azure Resource
	// Manager, another host.
	"azure-openai": inference("*.openai.azure.com",
		"/openai/deployments/", "/openai/v1/chat/completions", "/openai/v1/responses", "/openai/v1/embeddings", "/openai/v1/completions"),
	// Mistral: api.mistral.ai.
	"mistral": inference("api.mistral.ai",
		"/v1/chat/completions", "/v1/fim/completions", "/v1/agents/completions", "/v1/embeddings", "/v1/moderations", "/v1/chat/moderations"),
	// Local OpenAI-compatible servers (vLLM, llama.cpp, LM Studio,
	// Ollama's /v1 and native routes) on loopback host names.
	"local-openai": slices.Concat(
		inference("localhost", localPaths...),
		inference("127.0.0.1", localPaths...),
		inference("[::1]", localPaths...),
	),
}

var localPaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses",
	"/api/chat", "/api/generate", "/api/embed"}

// inference returns rules marking POSTs to host under each prefix as
// reads.
func inference(host string, prefixes ...string) []WriteRule {
	rules := make([]WriteRule, len(prefixes))
	for i, p := range prefixes {
		rules[i] = WriteRule{Host: host, PathPrefix: p, Methods: []string{"POST"}, Write: false}
	}
	return rules
}

// writes returns rules keeping every request to host under each prefix
// a write, ahead of a preset's read rules.
func writes(host string, prefixes ...string) []WriteRule {
	rules := make([]WriteRule, len(prefixes))
	for i, p := range prefixes {
		rules[i] = WriteRule{Host: host, PathPrefix: p, Write: true}
	}
	return rules
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// presetRules returns the rules of the named presets in order.
func presetRules(names []string) []WriteRule {
	var out []WriteRule
	for _, n := range names {
		out = append(out, Presets[n]...)
	}
	return out
}
