package wire_test

import (
	"fmt"
	"time"

	"github.com/llmpacer/llmpacer/internal/wire"
)

// What a caller sends acquire for a call of 1,300 tokens against a budget of
// 500 requests and 200,000 tokens a minute: each bucket's charge and
// allowance in microseconds (see docs/lua-contract.md).
func ExampleNewBucket() {
	rpm := wire.NewBucket("rpm", 500, 500, time.Minute, wire.Requests)
	tpm := wire.NewBucket("tpm", 200_000, 200_000, time.Minute, wire.Tokens)
	fmt.Println(rpm.Field, rpm.Charge(1), rpm.Allowance(0))
	fmt.Println(tpm.Field, tpm.Charge(1300), tpm.Allowance(0))
	// A batch call leaves the last 20% of each bucket to interactive calls.
	fmt.Println(tpm.Field, tpm.Charge(1300), tpm.Allowance(0.2))
	// Giving 300 unused tokens back moves the bucket's time back by:
	fmt.Println(tpm.Refund(300))
	// Output:
	// rpm 120000 60000999
	// tpm 390000 60000149
	// tpm 390000 48000149
	// 90000
}
