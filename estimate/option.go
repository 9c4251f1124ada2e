package estimate

import (
	"fmt"
	"math"
)

// DefaultMargin is the safety margin New applies when no WithMargin option is
// given: 5% of the prompt estimate, rounded up.
//
// The per-message rules reproduce OpenAI's documented counts exactly, but the
// provider's server-side formatting changes between model snapshots without
// notice, and the tool-definition rules are reverse-engineered. Five percent
// is a modest cushion against that drift, and whatever it over-reserves the
// settle step refunds.
const DefaultMargin = 0.05

// marginScale is the resolution of the margin: basis points (0.01%). Keeping
// the margin as an integer makes the round-up exact: a float like 0.05 has no
// exact binary form, and ceil(100*0.05) must be 5, never 6.
const marginScale = 10_000

// config is what the options set. Its zero value is not the default; New
// starts from defaultConfig.
type config struct {
	marginBP int64  // margin in basis points of the prompt estimate
	encoding string // forced encoding; "" picks it from the model name
}

func defaultConfig() config {
	return config{marginBP: int64(math.Round(DefaultMargin * marginScale))}
}

// Option changes how New builds an Estimator. Options are applied in order; a
// later option overrides an earlier one of the same kind.
type Option func(*config) error

// WithMargin sets the safety margin added to every prompt estimate, as a
// fraction of it: 0.05 adds 5%, rounded up to a whole token. The margin
// applies to the prompt only, never to the caller's max output, which is
// already an upper bound. Valid values are 0 to 1 (no margin to doubling),
// with a resolution of 0.0001; anything else makes New fail with
// ErrInvalidOption.
func WithMargin(fraction float64) Option {
	return func(c *config) error {
		// The negated test also rejects NaN, which fails every comparison.
		if !(fraction >= 0 && fraction <= 1) {
			return fmt.Errorf("%w: margin %v is outside [0, 1]", ErrInvalidOption, fraction)
		}
		c.marginBP = int64(math.Round(fraction * marginScale))
		return nil
	}
}

// WithEncoding makes the Estimator count with the named encoding instead of
// the one picked from the model name. It is meant for model names that hide
// the model, such as an Azure deployment called "prod-chat" that serves
// gpt-4o. Valid names are O200kBase, Cl100kBase and CharBased; anything else
// makes New fail with ErrInvalidOption.
func WithEncoding(name string) Option {
	return func(c *config) error {
		switch name {
		case O200kBase, Cl100kBase, CharBased:
			c.encoding = name
			return nil
		}
		return fmt.Errorf("%w: unknown encoding %q", ErrInvalidOption, name)
	}
}
