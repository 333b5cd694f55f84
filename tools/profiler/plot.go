package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"trainwire.dev/lib/cli"
	"trainwire.dev/tools/profiler/internal/analysis"
	"trainwire.dev/tools/profiler/internal/classify"
)

// PlotCmd draws a Gantt timeline.
type PlotCmd struct {
	TraceFlags
	Out      string  `short:"o" help:"Output picture: .png or .svg (also .pdf); - is stdout (PNG; never a terminal). A file appears only complete." required:"" env:"TRAINWIRE_PROFILER_PLOT_OUT"`
	FromMS   float64 `name:"from-ms" help:"Start of the window, ms after the first event (default: the start)." default:"0" env:"TRAINWIRE_PROFILER_FROM_MS"`
	ToMS     float64 `name:"to-ms" help:"End of the window, ms after the first event (0: the end)." default:"0" env:"TRAINWIRE_PROFILER_TO_MS"`
	WidthCM  float64 `name:"width-cm" help:"Picture width in cm." default:"32" env:"TRAINWIRE_PROFILER_WIDTH_CM"`
	MaxLanes int     `help:"Most lanes drawn per rank (the busiest)." default:"8" env:"TRAINWIRE_PROFILER_MAX_LANES"`
	Title    string  `help:"Title (default: the files)." env:"TRAINWIRE_PROFILER_TITLE"`
}

// Help is the verb's long help.
func (PlotCmd) Help() string {
	return `One row per rank and lane (GPU stream, or CPU thread / Horovod tensor / BytePS
partition in traces without device events), plus a row of iterations per rank.
Compute, communication, memory copies and sync have distinct colours; idle time is
the grey track between them. Times are ms after the first event; ranks with
relative clocks (legacy traces) each start at their own zero.

Exit codes: 0 ok, 1 error, 2 malformed trace, 80 usage.`
}

var classColor = map[classify.Class]color.RGBA{
	classify.Compute: {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	classify.Comm:    {R: 0xe6, G: 0x55, B: 0x0d, A: 0xff}, // orange
	classify.Memory:  {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	classify.Sync:    {R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
}

var (
	idleColor = color.RGBA{R: 0xe4, G: 0xe4, B: 0xe4, A: 0xff}
	stepColor = [2]color.RGBA{{R: 0xfd, G: 0xd0, B: 0x6b, A: 0xff}, {R: 0xf6, G: 0xb0, B: 0x3c, A: 0xff}}
)

type bar struct {
	x0, x1 float64
	row    int
	col    color.Color
	label  string // drawn inside the bar when it fits (step numbers)
}

// gantt is a plot.Plotter of bars on rows.
type gantt struct {
	bars  []bar
	rows  int
	xmin  float64
	xmax  float64
	track [][2]float64 // per row: the idle track's extent
}

func (g *gantt) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	rect := func(x0, x1, y0, y1 float64, col color.Color) {
		X0, X1 := trX(x0), trX(x1)
		if X1-X0 < 0.6 { // keep sub-pixel events visible
			X1 = X0 + 0.6
		}
		pts := []vg.Point{{X: X0, Y: trY(y0)}, {X: X1, Y: trY(y0)}, {X: X1, Y: trY(y1)}, {X: X0, Y: trY(y1)}}
		c.FillPolygon(col, c.ClipPolygonXY(pts))
	}
	for r, t := range g.track {
		if t[1] > t[0] {
			rect(t[0], t[1], float64(r)-0.08, float64(r)+0.08, idleColor)
		}
	}
	sty := p.Y.Tick.Label
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
	for _, b := range g.bars {
		rect(b.x0, b.x1, float64(b.row)-0.36, float64(b.row)+0.36, b.col)
		if b.label != "" && trX(b.x1)-trX(b.x0) > sty.Width(b.label)+vg.Points(4) {
			c.FillText(sty, vg.Point{X: (trX(b.x0) + trX(b.x1)) / 2, Y: trY(float64(b.row))}, b.label)
		}
	}
}

func (g *gantt) DataRange() (xmin, xmax, ymin, ymax float64) {
	return g.xmin, g.xmax, -0.7, float64(g.rows) - 0.3
}

type swatch struct{ col color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(s.col, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

// Run draws.
func (c *PlotCmd) Run(rio *cli.IO) error {
	ext, err := plotExt(c.Out)
	if err != nil {
		return err
	}
	ranks, err := c.load(rio)
	if err != nil {
		return err
	}
	win := window{from: c.FromMS, to: c.ToMS}
	var rows []row // top-down
	for _, r := range ranks {
		rows = append(rows, c.rankRows(r, win, rio)...)
	}
	if len(rows) == 0 {
		return errors.New("nothing to draw: no complete events in the window")
	}
	g, ticks := newGantt(rows, win)
	p, lg := c.newPlot(g, ticks)
	h := vg.Length(float64(len(rows))*0.75+4) * vg.Centimeter
	if err := save(p, &lg, vg.Length(c.WidthCM)*vg.Centimeter, h, ext, c.Out, rio); err != nil {
		return err
	}
	rio.Log.Info("wrote timeline", "file", c.Out, "rows", len(rows), "events", len(g.bars))
	return nil
}

// plotExt is the picture format --out asks for: its extension, png for -.
func plotExt(out string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(out), "."))
	if out == "-" {
		ext = "png"
	}
	switch ext {
	case "png", "svg", "pdf":
		return ext, nil
	}
	return "", cli.WithCode(cli.ExitUsage, fmt.Errorf("--out %s: want a .png, .svg or .pdf file", out))
}

// window is the drawn time range in ms (to 0: up to the end).
type window struct{ from, to float64 }

// clip cuts [a, b] to the window and reports whether anything is left.
func (w window) clip(a, b float64) (float64, float64, bool) {
	if w.to > 0 {
		b = math.Min(b, w.to)
	}
	a = math.Max(a, w.from)
	return a, b, b > a || (b == a && a >= w.from && (w.to == 0 || a <= w.to))
}

// row is one row of the timeline: its label, its bars and the extent of
// its idle track.
type row struct {
	label string
	bars  []bar
	track [2]float64
}

// rankRows is one rank's rows: its ProfilerSteps (numbered), then its
// busiest lanes (at most --max-lanes), each bar coloured by class.
func (c *PlotCmd) rankRows(r *analysis.Rank, win window, rio *cli.IO) []row {
	spans := timelineSpans(r)
	if len(spans) == 0 {
		return nil
	}
	t0 := spans[0].TS
	for _, s := range spans {
		t0 = min(t0, s.TS)
	}
	for _, s := range r.Steps {
		t0 = min(t0, s.TS)
	}
	x := func(ts int64) float64 { return float64(ts-t0) / 1e6 }
	var rows []row
	if len(r.Steps) > 0 {
		rw := row{label: fmt.Sprintf("rank %d · steps", r.Rank)}
		for i, s := range r.Steps {
			if a, b, ok := win.clip(x(s.TS), x(s.End)); ok {
				rw.bars = append(rw.bars, bar{x0: a, x1: b, col: stepColor[i%2], label: stepLabel(s.Name, i)})
			}
		}
		rows = append(rows, rw)
	}
	for _, l := range c.lanes(r, spans, rio) {
		rw := row{label: fmt.Sprintf("rank %d · %s", r.Rank, clipLeft(r.Lanes[l], 30)), track: [2]float64{math.Inf(1), math.Inf(-1)}}
		for _, s := range spans {
			if s.Lane != l {
				continue
			}
			a, b, ok := win.clip(x(s.TS), x(s.End))
			if !ok {
				continue
			}
			col, ok := classColor[s.Class]
			if !ok {
				col = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
			}
			rw.bars = append(rw.bars, bar{x0: a, x1: b, col: col})
			rw.track[0], rw.track[1] = math.Min(rw.track[0], a), math.Max(rw.track[1], b)
		}
		rows = append(rows, rw)
	}
	return rows
}

// lanes picks a rank's lanes to draw: the busiest first, at most
// --max-lanes, then in the same order on every rank (orderLanes).
func (c *PlotCmd) lanes(r *analysis.Rank, spans []*analysis.Span, rio *cli.IO) []int {
	busy := map[int]int64{}
	for _, s := range spans {
		busy[s.Lane] += s.Dur()
	}
	lanes := make([]int, 0, len(busy))
	for l := range busy {
		lanes = append(lanes, l)
	}
	sort.Slice(lanes, func(i, j int) bool {
		if busy[lanes[i]] != busy[lanes[j]] {
			return busy[lanes[i]] > busy[lanes[j]]
		}
		return lanes[i] < lanes[j]
	})
	if c.MaxLanes > 0 && len(lanes) > c.MaxLanes {
		rio.Log.Info("drawing the busiest lanes only", "rank", r.Rank, "lanes", len(lanes), "drawn", c.MaxLanes)
		lanes = lanes[:c.MaxLanes]
	}
	orderLanes(lanes, spans, r.Lanes)
	return lanes
}

// newGantt lays the rows out bottom-up (the first row on top), merging
// bars closer than a fraction of a pixel — a million kernels draw as the
// few thousand shapes a picture can show — and returns the rows' ticks.
func newGantt(rows []row, win window) (*gantt, []plot.Tick) {
	g := &gantt{xmin: math.Inf(1), xmax: math.Inf(-1), rows: len(rows), track: make([][2]float64, len(rows))}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, rw := range rows {
		for _, b := range rw.bars {
			lo, hi = math.Min(lo, b.x0), math.Max(hi, b.x1)
		}
	}
	eps := (hi - lo) / 8000
	var ticks []plot.Tick
	for i, rw := range rows {
		ri := len(rows) - 1 - i
		for _, b := range mergeBars(rw.bars, eps) {
			b.row = ri
			g.bars = append(g.bars, b)
			g.xmin, g.xmax = math.Min(g.xmin, b.x0), math.Max(g.xmax, b.x1)
		}
		g.track[ri] = rw.track
		ticks = append(ticks, plot.Tick{Value: float64(ri), Label: rw.label})
	}
	if win.from > 0 {
		g.xmin = win.from
	}
	if win.to > 0 {
		g.xmax = win.to
	}
	return g, ticks
}

// newPlot is the timeline's plot (title, axes, rows' ticks) and legend.
func (c *PlotCmd) newPlot(g *gantt, ticks []plot.Tick) (*plot.Plot, plot.Legend) {
	p := plot.New()
	p.Title.Text = c.Title
	if p.Title.Text == "" {
		var names []string
		for _, f := range c.Files {
			names = append(names, filepath.Base(filepath.Clean(f)))
		}
		p.Title.Text = "profiler timeline: " + clip(strings.Join(names, " "), 100)
	}
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Label.Text = "time since the first event (ms)"
	p.X.Label.TextStyle.Font.Size = vg.Points(12)
	p.X.Tick.Label.Font.Size = vg.Points(11)
	p.Y.Tick.Label.Font.Size = vg.Points(11)
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Add(g)
	lg := plot.NewLegend()
	lg.Top, lg.Left = true, true
	lg.TextStyle.Font.Size = vg.Points(11)
	lg.Add("compute", swatch{classColor[classify.Compute]})
	lg.Add("comm", swatch{classColor[classify.Comm]})
	lg.Add("memory", swatch{classColor[classify.Memory]})
	lg.Add("sync", swatch{classColor[classify.Sync]})
	lg.Add("idle", swatch{idleColor})
	lg.Add("iteration", swatch{stepColor[0]})
	lg.Padding = vg.Points(2)
	p.X.Min, p.X.Max = g.xmin, g.xmax
	p.X.Tick.Marker = msTicks{}
	return p, lg
}

// save renders p as ext into the output name ("-": stdout, where a
// terminal refuses it as it refuses any binary; a file appears only
// complete).
func save(p *plot.Plot, lg *plot.Legend, w, h vg.Length, ext, name string, rio *cli.IO) error {
	if name == "-" && cli.IsTerminal(rio.Stdout) {
		return cli.WithCode(cli.ExitUsage, errors.New("--out -: stdout is a terminal: redirect it (> timeline.png) or name a file"))
	}
	wt, err := draw.NewFormattedCanvas(w, h, ext)
	if err != nil {
		return err
	}
	// the legend in a column of its own on the right, never over a bar
	dc := draw.New(wt)
	lw := vg.Centimeter * 2.6
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	lg.Draw(draw.Crop(dc, w-lw+vg.Points(6), 0, 0, -vg.Centimeter))
	out, err := cli.CreateOutput(name, rio.Stdout)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := wt.WriteTo(out); err != nil {
		return err
	}
	return out.Commit()
}

// timelineSpans are the spans a rank's timeline is made of (device events
// when there are any, else CPU ops and communication).
func timelineSpans(r *analysis.Rank) []*analysis.Span {
	gpu := r.HasGPU()
	var out []*analysis.Span
	for i := range r.Spans {
		s := &r.Spans[i]
		if gpu && !s.GPU {
			continue
		}
		switch s.Class {
		case classify.Annotation, classify.Runtime, classify.Other:
			continue
		}
		out = append(out, s)
	}
	return out
}

// msTicks labels about ten round times.
type msTicks struct{}

func (msTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if span <= 0 {
		return []plot.Tick{{Value: lo, Label: fmtMS(lo, 1)}}
	}
	raw := span / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var t []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		t = append(t, plot.Tick{Value: v, Label: fmtMS(v, step)})
		for k := 1; k < 5; k++ {
			if m := v + float64(k)*step/5; m < hi {
				t = append(t, plot.Tick{Value: m})
			}
		}
	}
	return t
}

func fmtMS(v, step float64) string {
	d := 0
	if step < 1 {
		d = int(math.Ceil(-math.Log10(step)))
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// clipLeft keeps the end of s, where tensor names differ.
func clipLeft(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// mergeBars joins bars of one colour that overlap or lie within eps.
// stepLabel is a step bar's label: the number of "ProfilerStep#N", else
// its index.
func stepLabel(name string, i int) string {
	if k := strings.LastIndexByte(name, '#'); k >= 0 && k+1 < len(name) {
		return "#" + name[k+1:]
	}
	return "#" + strconv.Itoa(i)
}

// laneOrder ranks a lane by the class it is busiest with: compute first,
// then memory copies, then communication, then the rest.
var laneOrder = map[classify.Class]int{classify.Compute: 0, classify.Memory: 1, classify.Comm: 2, classify.Sync: 3}

// orderLanes sorts lanes the same way on every rank: by the class each is
// busiest with (laneOrder), then by name (thread and stream ids differ
// between ranks; what runs on a lane does not).
func orderLanes(lanes []int, spans []*analysis.Span, names []string) {
	busy := map[int]map[classify.Class]int64{}
	for _, s := range spans {
		if busy[s.Lane] == nil {
			busy[s.Lane] = map[classify.Class]int64{}
		}
		busy[s.Lane][s.Class] += s.Dur()
	}
	rank := func(l int) int {
		best, most := 4, int64(-1)
		for cl, d := range busy[l] {
			o, ok := laneOrder[cl]
			if !ok {
				o = 4
			}
			if d > most || (d == most && o < best) {
				best, most = o, d
			}
		}
		return best
	}
	sort.SliceStable(lanes, func(i, j int) bool {
		ri, rj := rank(lanes[i]), rank(lanes[j])
		if ri != rj {
			return ri < rj
		}
		if ni, nj := laneName(names, lanes[i]), laneName(names, lanes[j]); ni != nj {
			return ni < nj
		}
		return lanes[i] < lanes[j]
	})
}

func laneName(names []string, l int) string {
	if l >= 0 && l < len(names) {
		return names[l]
	}
	return ""
}

func mergeBars(bs []bar, eps float64) []bar {
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].x0 < bs[j].x0 })
	var out []bar
	last := map[color.Color]int{}
	for _, b := range bs {
		if i, ok := last[b.col]; ok && b.x0-out[i].x1 <= eps {
			out[i].x1 = math.Max(out[i].x1, b.x1)
			continue
		}
		last[b.col] = len(out)
		out = append(out, b)
	}
	return out
}
