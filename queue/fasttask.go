package queue

import (
	"encoding/base64"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
)

// decodeTaskFast reads a whole task record of a layout this version writes
// (encode.go), as UnmarshalJSON's general way reads it, or reports false.
// A worker reads the task it claims, and the general way (json v2 with
// encoding/json's semantics) took several times as long as the claim's
// other work on the CPU.
func decodeTaskFast(data []byte) (Task, bool) {
	s := jsonrec.NewScanner(data)
	var t Task
	// Str's strings are stored by Done, into the fields named here.
	ok := s.Lit(`{"id":`) && s.Str(&t.ID) &&
		s.Lit(`,"queue":`) && s.Str(&t.Queue) &&
		s.Lit(`,"key":`) && s.Str(&t.Key) &&
		s.Lit(`,"priority":`) && scanPriority(s, &t.Priority) &&
		s.Lit(`,"labels":`) && s.StringMap(&t.Labels, true) &&
		s.Lit(`,"payload":`) && (s.Lit("null") || scanBytes(s, &t.Payload)) &&
		s.Lit(`,"state":`) && scanState(s, &t.State) &&
		s.Lit(`,"attempts":`) && s.Int(&t.Attempts) &&
		s.Lit(`,"seq":`) && s.Uint(&t.Seq) &&
		s.Lit(`,"added_at":`) && s.Time(&t.AddedAt) &&
		s.Lit(`,"updated_at":`) && s.Time(&t.UpdatedAt)
	if !ok {
		return Task{}, false
	}
	if s.Lit(`,"run":{"attempt":`) {
		r := &Run{}
		ok = s.Int(&r.Attempt) &&
			s.Lit(`,"slot":`) && s.Str(&r.Slot) &&
			s.Lit(`,"lane":`) && s.Int(&r.Lane) &&
			s.Lit(`,"fence":`) && s.Uint(&r.Fence) &&
			s.Lit(`,"token":`) && s.Int(&r.Token) &&
			s.Lit(`,"host":`) && s.Str(&r.Host) &&
			s.Lit(`,"pid":`) && s.Int(&r.PID) &&
			(!s.Lit(`,"pid_start":`) || s.Str(&r.PIDStart)) &&
			s.Lit(`,"instance":`) && s.Str(&r.Instance) &&
			s.Lit(`,"claimed":`) && s.Uint(&r.Claimed) &&
			s.Lit(`,"started_at":`) && s.Time(&r.StartedAt) &&
			s.Lit(`}`)
		if !ok {
			return Task{}, false
		}
		t.Run = r
	}
	if s.Lit(`,"result":{"attempt":`) {
		r := &Result{}
		ok = s.Int(&r.Attempt) &&
			s.Lit(`,"reason":`) && s.Str(&r.Reason)
		if ok && s.Lit(`,"exit_code":`) {
			code := 0
			ok = s.Int(&code)
			r.ExitCode = &code
		}
		ok = ok &&
			(!s.Lit(`,"error":`) || s.Str(&r.Error)) &&
			(!s.Lit(`,"slot":`) || s.Str(&r.Slot)) &&
			(!s.Lit(`,"fence":`) || s.Uint(&r.Fence)) &&
			(!s.Lit(`,"host":`) || s.Str(&r.Host)) &&
			(!s.Lit(`,"pid":`) || s.Int(&r.PID)) &&
			(!s.Lit(`,"instance":`) || s.Str(&r.Instance)) &&
			(!s.Lit(`,"claimed":`) || s.Uint(&r.Claimed)) &&
			(!s.Lit(`,"started_at":`) || s.Time(&r.StartedAt)) &&
			s.Lit(`,"ended_at":`) && s.Time(&r.EndedAt) &&
			s.Lit(`}`)
		if !ok {
			return Task{}, false
		}
		t.Result = r
	}
	if s.Lit(`,"cancel_requested":`) {
		switch {
		case s.Lit("true"):
			t.CancelRequested = true
		case !s.Lit("false"):
			return Task{}, false
		}
	}
	if s.Lit(`,"retry_after":`) {
		d, ok := s.Raw() // now: Str's strings come only with Done
		if !ok {
			return Task{}, false
		}
		after, err := time.ParseDuration(string(d))
		if err != nil {
			return Task{}, false
		}
		t.RetryAfter = Duration(after)
	}
	if !s.Lit(`}`) || !s.Done() {
		return Task{}, false
	}
	return t, true
}

// scanBytes reads a payload as encoding/json writes one: standard base64,
// padded, and nothing a lenient decoder would read differently.
func scanBytes(s *jsonrec.Scanner, dst *[]byte) bool {
	raw, ok := s.Raw() // now: Str's strings come only with Done
	if !ok {
		return false
	}
	b, err := base64.StdEncoding.Strict().AppendDecode(make([]byte, 0, base64.StdEncoding.DecodedLen(len(raw))), raw)
	if err != nil {
		return false
	}
	*dst = b
	return true
}
