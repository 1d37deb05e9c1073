package proxy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnknownPresetIsAConfigError(t *testing.T) {
	cfg := baseConfig(t)
	cfg.WritePresets = []string{"openai", "nope"}
	err := cfg.Validate()
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Contains(t, err.Error(), "writePresets[1]")
}
