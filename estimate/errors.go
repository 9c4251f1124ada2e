package estimate

import "errors"

// ErrInvalidOption reports an Option that New cannot apply, such as a margin
// outside [0, 1] or an unknown encoding name. New wraps it with the details;
// match it with errors.Is.
var ErrInvalidOption = errors.New("estimate: invalid option")

// ErrInvalidRequest reports a Request that Estimate refuses to count, such as
// a negative MaxOutput or tool parameters that are not valid JSON. Estimate
// wraps it with the details; match it with errors.Is.
var ErrInvalidRequest = errors.New("estimate: invalid request")
