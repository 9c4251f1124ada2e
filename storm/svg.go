package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strings"
)

// Layout of the chart, in SVG user units.
const (
	svgW      = 960
	svgLeft   = 78
	svgRight  = 24
	svgHead   = 70
	svgPlotH  = 150 // tokens per second
	svgStripH = 44  // 429s
	svgPanelH = 26 + svgPlotH + 8 + svgStripH + 34
)

// renderSVG draws one scenario's timeline: a panel per row, each with the
// tokens the provider admitted per second (a moving average over a fifth
// of the provider's window, so a sped-up run reads like a real one) against
// the provider's rate, and the 429s it answered in each bin below. It is
// hand-written SVG: any browser opens it.
func renderSVG(r scenarioReport) []byte {
	var b bytes.Buffer
	h := svgHead + len(r.Rows)*svgPanelH + 10
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", svgW, h, svgW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">storm: %s</text>`+"\n", svgLeft, esc(r.Name))
	fmt.Fprintf(&b, `<text x="%d" y="42" fill="#444">%s</text>`+"\n", svgLeft, esc(fmt.Sprintf(
		"%d workers, %d jobs; provider %s tokens per %s (%s). Blue: tokens the provider admitted per second;",
		r.Workers, r.Jobs, thousands(r.ProviderTokens), secs(r.WindowSeconds), r.ProviderMode)))
	fmt.Fprintf(&b, `<text x="%d" y="56" fill="#444">dashed: the provider's rate; green: the floor; red: 429s per %s.</text>`+"\n", svgLeft, secs(r.BinSeconds))

	var longest float64
	for _, row := range r.Rows {
		longest = max(longest, row.Seconds)
	}
	longest = max(longest, 0.1)
	rate := float64(r.ProviderTokens) / r.WindowSeconds
	avg := max(1, int(math.Round(r.WindowSeconds/5/r.BinSeconds))) // bins per trailing average
	series := make([][]float64, len(r.Rows))
	top, top429 := rate*1.25, 1.0
	for i, row := range r.Rows {
		series[i] = movingRate(row.Timeline, avg, int(math.Ceil(row.Seconds/r.BinSeconds)), r.BinSeconds)
		for _, v := range series[i] {
			top = max(top, v)
		}
		for _, bn := range row.Timeline {
			top429 = max(top429, float64(bn.RateLimited))
		}
	}
	// A full bucket spent at once is a tall first spike; cap the scale so
	// the steady part stays readable, and label what goes past it.
	top = niceCeil(min(top, rate*3))
	top429 = niceCeil(top429)

	plotW := float64(svgW - svgLeft - svgRight)
	x := func(s float64) float64 { return svgLeft + s/longest*plotW }
	for i, row := range r.Rows {
		y0 := float64(svgHead + i*svgPanelH)
		title := fmt.Sprintf("%s: %.2f s, %d calls, %d 429s, %d failed", row.Label, row.Seconds, row.Calls, row.RateLimited, row.Failed)
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", svgLeft, y0+16, esc(title))
		py := y0 + 26
		y := func(v float64) float64 { return py + svgPlotH - min(v, top)/top*svgPlotH }
		// Axes and grid.
		for _, v := range []float64{0, top / 2, top} {
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", svgLeft, svgW-svgRight, y(v), y(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s/s</text>`+"\n", svgLeft-6, y(v)+4, compact(v))
		}
		// Tokens admitted per second, as a step line filled below.
		var path bytes.Buffer
		fmt.Fprintf(&path, "M%.1f %.1f", x(0), y(0))
		end := min(float64(len(series[i]))*r.BinSeconds, longest)
		for k, v := range series[i] {
			fmt.Fprintf(&path, " L%.1f %.1f L%.1f %.1f", x(float64(k)*r.BinSeconds), y(v), x(min(float64(k+1)*r.BinSeconds, end)), y(v))
		}
		fmt.Fprintf(&path, " L%.1f %.1f Z", x(end), y(0))
		fmt.Fprintf(&b, `<path d="%s" fill="#4a78c2" fill-opacity="0.35" stroke="#2a58a2" stroke-width="1.2"/>`+"\n", path.String())
		for k, v := range series[i] {
			if v > top && (k == 0 || series[i][k-1] <= top) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#2a58a2">▲ %s/s</text>`+"\n", x(float64(k)*r.BinSeconds)+2, py+10, thousands(int64(v)))
			}
		}
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#222" stroke-dasharray="6 4"/>`+"\n", svgLeft, svgW-svgRight, y(rate), y(rate))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" font-size="10" fill="#222">provider rate %s/s</text>`+"\n", svgW-svgRight-4, y(rate)-4, thousands(int64(rate)))
		if f := r.floor(row); f != nil && *f <= longest {
			fx := x(*f)
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#2a8a2a" stroke-dasharray="3 3"/>`+"\n", fx, fx, py, py+svgPlotH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#2a8a2a" text-anchor="end">floor %.1f s</text>`+"\n", fx-3, py+svgPlotH-4, *f)
		}
		// 429s per bin.
		sy := py + svgPlotH + 8
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="#fbeaea"/>`+"\n", svgLeft, sy, plotW, svgStripH)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#b22">429s</text>`+"\n", svgLeft-6, sy+svgStripH/2+4)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" font-size="10" fill="#b22">%.0f</text>`+"\n", svgLeft-6, sy+9, top429)
		bw := max(plotW*r.BinSeconds/longest-0.5, 0.8)
		for k, bn := range row.Timeline {
			if bn.RateLimited == 0 {
				continue
			}
			bh := float64(bn.RateLimited) / top429 * svgStripH
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#c22"/>`+"\n", x(float64(k)*r.BinSeconds), sy+svgStripH-bh, bw, bh)
		}
		// Time axis.
		ay := sy + svgStripH
		step := niceCeil(longest / 8)
		for s := 0.0; s <= longest+1e-9; s += step {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#555"/>`+"\n", x(s), x(s), ay, ay+4)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", x(s), ay+16, secs(s))
		}
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#555"/>`+"\n", svgLeft, svgW-svgRight, ay, ay)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// movingRate turns the first upto bins (of width w seconds) into tokens
// per second, each averaged over the n bins centred on it; bins past either
// end count as empty.
func movingRate(bins []bin, n, upto int, w float64) []float64 {
	upto = min(upto, len(bins))
	out := make([]float64, upto)
	for i := range out {
		lo, hi := max(i-n/2, 0), min(i-n/2+n, upto)
		var sum int64
		for _, bn := range bins[lo:hi] {
			sum += bn.Tokens
		}
		out[i] = float64(sum) / (float64(n) * w)
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// compact formats an axis value: 2,000 → "2k", 1,500,000 → "1.5M".
func compact(v float64) string {
	f := func(x float64, unit string) string {
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", x), "0"), ".") + unit
	}
	switch {
	case v >= 1e6:
		return f(v/1e6, "M")
	case v >= 1e3:
		return f(v/1e3, "k")
	}
	return f(v, "")
}

func esc(s string) string { return html.EscapeString(s) }
