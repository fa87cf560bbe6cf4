package reservecmd

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/reserve"
)

func lsRun(ctx context.Context, o *Options) error {
	var natsOpts []nats.Option
	if o.Watch {
		natsOpts = o.F.LongLived("reserve ls", nil)
	}
	ss, err := o.F.Spaces(ctx, nil, natsOpts...)
	if err != nil {
		return err
	}
	if o.Space == "" {
		return lsSpaces(ctx, o, ss)
	}
	if !o.Watch {
		st, err := ss.Status(ctx, o.Space)
		if err != nil {
			return err
		}
		return printSpace(o, st)
	}
	w, err := ss.Bucket().Watch(ctx, reserve.Key(o.Space))
	if err != nil {
		return err
	}
	defer w.Stop()
	sigs, ctx := cmdutil.NotifySignals(ctx)
	defer sigs.Stop()
	printed := false
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			var st reserve.Status
			switch {
			case e == nil && printed:
				continue
			case e == nil: // the space was never written
				st = reserve.Status{Space: o.Space, ServerTime: time.Now().UTC(), Reservations: []reserve.Row{}}
			case !e.Live():
				st = reserve.Status{Space: o.Space, Revision: e.Revision, ServerTime: e.Created, Reservations: []reserve.Row{}}
			default:
				if st, err = reserve.StatusOf(o.Space, *e, time.Time{}); err != nil {
					return err
				}
			}
			printed = true
			if err := printSpace(o, st); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

func printSpace(o *Options, st reserve.Status) error {
	if o.F.Config.JSON {
		if o.Watch {
			return cmdutil.PrintJSONLine(o.F.IO.Out, st)
		}
		return cmdutil.PrintJSON(o.F.IO.Out, st)
	}
	out := o.F.IO.Out
	if o.Watch {
		cmdutil.Fprintf(out, "--- %s at revision %d\n", st.Space, st.Revision)
	}
	if len(st.Reservations) == 0 {
		cmdutil.Fprintf(out, "%s: no reservations\n", st.Space)
		return nil
	}
	t := cmdutil.NewTable("ID", "STATE", "MODE", "PATTERNS", "AGENT", "TASK", "HOST", "PID", "FENCE", "AGE", "LEFT")
	for _, r := range st.Reservations {
		fence := ""
		if r.State != "waiting" {
			fence = strconv.FormatUint(r.Fence, 10)
		}
		t.Row(r.ID, r.State, mode(r.Shared), strings.Join(r.Patterns, " "), dash(r.Agent), dash(r.Task), r.Host,
			strconv.Itoa(r.PID), fence, since(r.AgeMS), since(r.TTLLeftMS))
	}
	_, err := t.WriteTo(out)
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// spaceRow is a space as reserve ls without a space lists it.
type spaceRow struct {
	Space    string `json:"space"`
	Held     int    `json:"held"`
	Waiting  int    `json:"waiting"`
	Size     int    `json:"size"`
	Revision uint64 `json:"revision"`
}

func lsSpaces(ctx context.Context, o *Options, ss *reserve.Spaces) error {
	all, err := ss.List(ctx)
	if err != nil {
		return err
	}
	rows := make([]spaceRow, 0, len(all))
	for _, st := range all {
		r := spaceRow{Space: st.Space, Held: st.Held(), Size: st.Size, Revision: st.Revision}
		for _, x := range st.Reservations {
			if x.State == "waiting" {
				r.Waiting++
			}
		}
		rows = append(rows, r)
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, rows)
	}
	if len(rows) == 0 {
		cmdutil.Fprintf(o.F.IO.Out, "no reservation spaces\n")
		return nil
	}
	t := cmdutil.NewTable("SPACE", "HELD", "WAITING", "BYTES")
	for _, r := range rows {
		t.Row(r.Space, strconv.Itoa(r.Held), strconv.Itoa(r.Waiting), strconv.Itoa(r.Size))
	}
	_, err = t.WriteTo(o.F.IO.Out)
	return err
}
