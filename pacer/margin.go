package pacer

import "github.com/llmpacer/llmpacer/internal/wire"

// inputMargin returns the margin a Spend rate reserves on model's prompt
// under a Price whose InputMargin is set: set if positive, none if
// negative, the family's if 0.
func inputMargin(set float64, model string) float64 {
	switch {
	case set > 0:
		return set
	case set < 0:
		return 0
	}
	return wire.InputMargin(model)
}
