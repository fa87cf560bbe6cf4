package queue

import (
	"encoding/base64"
	"encoding/json"

	"github.com/batonhq/baton/internal/jsonappend"
)

// A worker writes a task three times and a token twice in each attempt's
// life; encoding/json's reflection took a tenth of a worker's time. The
// records are written member by member instead, byte for byte as
// encoding/json writes them (tests and fuzz targets compare the two), and
// the general way for anything else (jsonappend).

// appendJSON writes t's known fields, or reports false.
func (t *Task) appendJSON() ([]byte, bool) {
	w := jsonappend.New(384 + base64.StdEncoding.EncodedLen(len(t.Payload)) + 24*len(t.Labels))
	w.Raw(`{"id":`)
	w.Str(t.ID)
	w.Raw(`,"queue":`)
	w.Str(t.Queue)
	w.Raw(`,"key":`)
	w.Str(t.Key)
	w.Raw(`,"priority":`)
	w.Str(string(t.Priority))
	w.Raw(`,"labels":`)
	w.StringMap(t.Labels)
	w.Raw(`,"payload":`)
	if t.Payload == nil {
		w.Raw("null")
	} else {
		w.B = append(w.B, '"')
		w.B = base64.StdEncoding.AppendEncode(w.B, t.Payload)
		w.B = append(w.B, '"')
	}
	w.Raw(`,"state":`)
	w.Str(string(t.State))
	w.Raw(`,"attempts":`)
	w.Int(int64(t.Attempts))
	w.Raw(`,"seq":`)
	w.Uint(t.Seq)
	w.Raw(`,"added_at":`)
	w.Time(t.AddedAt)
	w.Raw(`,"updated_at":`)
	w.Time(t.UpdatedAt)
	if r := t.Run; r != nil {
		w.Raw(`,"run":{"attempt":`)
		w.Int(int64(r.Attempt))
		w.Raw(`,"slot":`)
		w.Str(r.Slot)
		w.Raw(`,"lane":`)
		w.Int(int64(r.Lane))
		w.Raw(`,"fence":`)
		w.Uint(r.Fence)
		w.Raw(`,"token":`)
		w.Int(int64(r.Token))
		w.Raw(`,"host":`)
		w.Str(r.Host)
		w.Raw(`,"pid":`)
		w.Int(int64(r.PID))
		if r.PIDStart != "" {
			w.Raw(`,"pid_start":`)
			w.Str(r.PIDStart)
		}
		w.Raw(`,"instance":`)
		w.Str(r.Instance)
		w.Raw(`,"claimed":`)
		w.Uint(r.Claimed)
		w.Raw(`,"started_at":`)
		w.Time(r.StartedAt)
		w.Raw(`}`)
	}
	if r := t.Result; r != nil {
		w.Raw(`,"result":{"attempt":`)
		w.Int(int64(r.Attempt))
		w.Raw(`,"reason":`)
		w.Str(r.Reason)
		if r.ExitCode != nil {
			w.Raw(`,"exit_code":`)
			w.Int(int64(*r.ExitCode))
		}
		if r.Error != "" {
			w.Raw(`,"error":`)
			w.Str(r.Error)
		}
		if r.Slot != "" {
			w.Raw(`,"slot":`)
			w.Str(r.Slot)
		}
		if r.Fence != 0 {
			w.Raw(`,"fence":`)
			w.Uint(r.Fence)
		}
		if r.Host != "" {
			w.Raw(`,"host":`)
			w.Str(r.Host)
		}
		if r.PID != 0 {
			w.Raw(`,"pid":`)
			w.Int(int64(r.PID))
		}
		if r.Instance != "" {
			w.Raw(`,"instance":`)
			w.Str(r.Instance)
		}
		if r.Claimed != 0 {
			w.Raw(`,"claimed":`)
			w.Uint(r.Claimed)
		}
		if !r.StartedAt.IsZero() {
			w.Raw(`,"started_at":`)
			w.Time(r.StartedAt)
		}
		w.Raw(`,"ended_at":`)
		w.Time(r.EndedAt)
		w.Raw(`}`)
	}
	if t.CancelRequested {
		w.Raw(`,"cancel_requested":true`)
	}
	if t.RetryAfter != 0 {
		w.Raw(`,"retry_after":`)
		w.Str(t.RetryAfter.String())
	}
	w.Raw(`}`)
	return w.B, w.OK
}

// encode is json.Marshal(tok), member by member where it can be.
func (tok *token) encode() ([]byte, error) {
	w := jsonappend.New(320)
	w.Raw(`{"queue":`)
	w.Str(tok.Queue)
	w.Raw(`,"index":`)
	w.Int(int64(tok.Index))
	w.Raw(`,"task":`)
	w.Str(tok.Task)
	w.Raw(`,"key":`)
	w.Str(tok.Key)
	w.Raw(`,"slot":`)
	w.Str(tok.Slot)
	w.Raw(`,"fence":`)
	w.Uint(tok.Fence)
	w.Raw(`,"host":`)
	w.Str(tok.Host)
	w.Raw(`,"pid":`)
	w.Int(int64(tok.PID))
	if tok.PIDStart != "" {
		w.Raw(`,"pid_start":`)
		w.Str(tok.PIDStart)
	}
	w.Raw(`,"instance":`)
	w.Str(tok.Instance)
	w.Raw(`,"acquired_at":`)
	w.Time(tok.Acquired)
	w.Raw(`,"renewed_at":`)
	w.Time(tok.Renewed)
	w.Raw(`}`)
	if w.OK {
		return w.B, nil
	}
	return json.Marshal(tok)
}
