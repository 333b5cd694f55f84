package main

import (
	"fmt"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/tools/ckpt/internal/calc"
)

// WastedCmd is `ckpt wasted`: Eq. 6.1 and the effective-training-time model.
type WastedCmd struct {
	TCkpt     time.Duration `name:"t-ckpt" required:"" help:"Checkpoint time t_ckpt (e.g. 42m, 3s)."`
	Interval  time.Duration `help:"Checkpoint interval 1/f (default max(t_ckpt, T_iter))."`
	TRtvl     time.Duration `name:"t-rtvl" help:"Retrieval time of the latest complete checkpoint."`
	Iter      time.Duration `help:"Iteration time T_iter (enforces 1/f ≥ T_iter and gives HighFreq's interval)."`
	Instances int           `help:"Also run the effective-training-time model (seed notes D.4.6) for this many instances (1.5% fail per day)."`
	Overhead  time.Duration `help:"Gemini's time lost per failure in the model (thesis: about 7 min for software failures)." default:"7m"`
	Serialize time.Duration `help:"HighFreq's blocking torch.save per checkpoint in the model." default:"81s"`
	HFIters   int           `name:"highfreq-iters" help:"HighFreq's interval in iterations in the model (default ⌈t_ckpt/T_iter⌉; the thesis's run used 9)."`
	Format    string        `help:"Output: table or json." enum:"table,json" default:"table"`
}

// Run prints T_wasted and, with --iter, HighFreq's interval.
func (c *WastedCmd) Run(rio *cli.IO) error {
	iv := c.Interval
	if iv == 0 {
		iv = max(c.TCkpt, c.Iter)
	}
	w, err := calc.Wasted(c.TCkpt.Seconds(), iv.Seconds(), c.TRtvl.Seconds(), c.Iter.Seconds())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	out := map[string]any{"t_ckpt_s": c.TCkpt.Seconds(), "interval_s": iv.Seconds(), "t_rtvl_s": c.TRtvl.Seconds(), "wasted_s": w}
	if c.Iter > 0 {
		out["iter_s"] = c.Iter.Seconds()
		out["highfreq_interval_iters"] = calc.HighFreqInterval(c.TCkpt.Seconds(), c.Iter.Seconds())
		out["interval_iters"] = iv.Seconds() / c.Iter.Seconds()
	}
	if c.Instances > 0 {
		r := calc.Simulate(calc.SimParams{FailuresPerDay: 0.015 * float64(c.Instances), GeminiOverhead: c.Overhead.Seconds(),
			Iter: c.Iter.Seconds(), TCkpt: c.TCkpt.Seconds(), TRtvl: c.TRtvl.Seconds(), Serialize: c.Serialize.Seconds(),
			Detect: 15, Restart: 240, StrawmanInterval: 3 * 3600, HighFreqIters: c.HFIters})
		out["failures_per_day"] = 0.015 * float64(c.Instances)
		out["effective_gemini"], out["effective_highfreq"], out["effective_strawman"] = r.Gemini, r.HighFreq, r.Strawman
	}
	if c.Format == "json" {
		return writeJSON(rio.Stdout, out)
	}
	fmt.Fprintf(rio.Stdout, "T_wasted = t_ckpt + 1/(2f) + t_rtvl = %v + %v/2 + %v = %v\n", c.TCkpt, iv, c.TRtvl, time.Duration(w*float64(time.Second)).Round(time.Millisecond))
	if c.Iter > 0 {
		fmt.Fprintf(rio.Stdout, "checkpoint every %.3g iterations; HighFreq would checkpoint every ⌈t_ckpt/T_iter⌉ = %d iterations\n", iv.Seconds()/c.Iter.Seconds(), out["highfreq_interval_iters"])
	}
	if c.Instances > 0 {
		fmt.Fprintf(rio.Stdout, "effective training time, %d instances (%.3g failures/day): gemini %.3f  highfreq %.3f  strawman %.3f\n",
			c.Instances, out["failures_per_day"], out["effective_gemini"], out["effective_highfreq"], out["effective_strawman"])
	}
	return nil
}
