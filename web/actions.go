package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/view"
)

// maxBody bounds an action's request body.
const maxBody = 64 << 10

// action wraps a mutation: refused when read-only, logged with what was
// asked, from where and how it ended, and answered as JSON.
func (s *Server) action(what string, fn func(r *http.Request) (int, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		target := strings.TrimPrefix(r.URL.Path, "/api/v1/")
		by := []any{"remote", r.RemoteAddr, "user_agent", r.UserAgent(), "token", s.token != ""}
		if s.readOnly {
			s.log.Warn("action refused", append([]any{"action", what, "target", target, "why", "read-only"}, by...)...)
			writeError(w, fmt.Errorf("%w: %s is not allowed; start `baton ui` without --read-only to act", ErrReadOnly, what))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		code, doc, err := fn(r)
		if err != nil {
			s.log.Warn("action failed", append([]any{"action", what, "target", target, "err", err}, by...)...)
			writeError(w, err)
			return
		}
		s.log.Info("action done", append([]any{"action", what, "target", target}, by...)...)
		writeJSON(w, code, doc)
	}
}

// body decodes an optional JSON body into v (an empty body leaves it).
func body(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("%w: reading the request: %w", ErrInvalid, err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: the request is not the JSON expected: %w", ErrInvalid, err)
	}
	return nil
}

// TransferRequest names the candidate to hand leadership to.
type TransferRequest struct {
	To string `json:"to"`
}

// actTransfer asks the leader of an agent key to hand over to a candidate
// (`baton leader transfer KEY --to INSTANCE`). It answers 202 once asked:
// the leader hands over when it has stopped its work, and the event stream
// says so.
func (s *Server) actTransfer(r *http.Request) (int, any, error) {
	var req TransferRequest
	if err := body(r, &req); err != nil {
		return 0, nil, err
	}
	if req.To == "" {
		req.To = r.URL.Query().Get("to")
	}
	if req.To == "" {
		return 0, nil, fmt.Errorf("%w: name the candidate to hand over to: {\"to\": INSTANCE}", ErrInvalid)
	}
	key := r.PathValue("key")
	return s.transfer(r.Context(), key, req.To)
}

func (s *Server) transfer(ctx context.Context, key, to string) (int, any, error) {
	el, err := s.ls.Election(key)
	if err != nil {
		return 0, nil, err
	}
	if err := el.RequestTransfer(ctx, to); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, map[string]any{"key": key, "transfer_to": to, "requested": true}, nil
}

// actResign asks the leader to step down for the best other eligible
// candidate (`baton leader resign KEY`).
func (s *Server) actResign(r *http.Request) (int, any, error) {
	key := r.PathValue("key")
	el, err := s.ls.Election(key)
	if err != nil {
		return 0, nil, err
	}
	to, err := el.RequestResign(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, map[string]any{"key": key, "transfer_to": to, "requested": true}, nil
}

// actDoctorFix checks and fixes what can be fixed safely (`baton doctor
// --fix`): CAS deletes, so a record renewed meanwhile stays.
func (s *Server) actDoctorFix(r *http.Request) (int, any, error) {
	c := s.checker()
	rep, err := c.Run(r.Context())
	if err != nil {
		return 0, nil, err
	}
	c.Fix(r.Context(), rep)
	s.setReport(rep)
	return http.StatusOK, rep, nil
}

func (s *Server) needQueues() error {
	if s.qs == nil {
		return fmt.Errorf("%w: this dashboard has no queues", ErrNotFound)
	}
	return nil
}

func (s *Server) actCancel(r *http.Request) (int, any, error) {
	return s.taskAction(r, func(ctx context.Context, q, id string) (*queue.Task, error) { return s.qs.Cancel(ctx, q, id) })
}

func (s *Server) actRetry(r *http.Request) (int, any, error) {
	return s.taskAction(r, func(ctx context.Context, q, id string) (*queue.Task, error) { return s.qs.Retry(ctx, q, id) })
}

// taskAction applies fn to the task the path names and answers with the
// task as `queue get --json` prints it, without its payload.
func (s *Server) taskAction(r *http.Request, fn func(ctx context.Context, q, id string) (*queue.Task, error)) (int, any, error) {
	if err := s.needQueues(); err != nil {
		return 0, nil, err
	}
	t, err := fn(r.Context(), r.PathValue("queue"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	doc, err := taskDoc(t)
	return http.StatusOK, doc, err
}

// taskDoc is a task's JSON without its payload.
func taskDoc(t *queue.Task) (map[string]any, error) {
	doc, err := view.TaskJSON(t)
	delete(doc, "payload")
	return doc, err
}

// pauseAction pauses (or resumes) the queue the path names, or its key
// when the path names one, and answers as `queue pause --json` does.
func (s *Server) pauseAction(pause bool) func(r *http.Request) (int, any, error) {
	return func(r *http.Request) (int, any, error) {
		if err := s.needQueues(); err != nil {
			return 0, nil, err
		}
		q, key := r.PathValue("queue"), r.PathValue("key")
		doc := map[string]any{"queue": q, "paused": pause}
		if key != "" {
			set := s.qs.ResumeKey
			if pause {
				set = s.qs.PauseKey
			}
			k, err := set(r.Context(), q, key)
			if err != nil {
				return 0, nil, err
			}
			doc["key"], doc["revision"] = key, k.Revision
			return http.StatusOK, doc, nil
		}
		set := s.qs.Resume
		if pause {
			set = s.qs.Pause
		}
		c, err := set(r.Context(), q)
		if err != nil {
			return 0, nil, err
		}
		doc["revision"] = c.Revision
		return http.StatusOK, doc, nil
	}
}

// scheduleAction pauses (or resumes) the schedule the path names.
func (s *Server) scheduleAction(pause bool) func(r *http.Request) (int, any, error) {
	return func(r *http.Request) (int, any, error) {
		if err := s.needQueues(); err != nil {
			return 0, nil, err
		}
		set := s.qs.ResumeSchedule
		if pause {
			set = s.qs.PauseSchedule
		}
		sc, err := set(r.Context(), r.PathValue("queue"), r.PathValue("name"))
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, map[string]any{"queue": sc.Queue, "name": sc.Name, "paused": sc.Paused, "revision": sc.Revision}, nil
	}
}

// actRelease frees a key whose holder is dead or stale (?force=1: any).
func (s *Server) actRelease(r *http.Request) (int, any, error) {
	if err := s.needQueues(); err != nil {
		return 0, nil, err
	}
	force := r.URL.Query().Get("force") == "1"
	rel, err := s.qs.Release(r.Context(), r.PathValue("queue"), r.PathValue("key"), force)
	if err != nil {
		return 0, nil, err
	}
	out := []map[string]any{}
	for _, x := range rel {
		m, err := view.RecordJSON(x.Lock, nil)
		if err != nil {
			return 0, nil, err
		}
		doc := map[string]any{"lock": m}
		if x.Task != nil {
			if doc["task"], err = taskDoc(x.Task); err != nil {
				return 0, nil, err
			}
		}
		out = append(out, doc)
	}
	return http.StatusOK, map[string]any{"released": out}, nil
}
