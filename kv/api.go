package kv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const apiPrefix = "$JS.API."

// apiResponse is the error part every JetStream API answer may carry.
type apiResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
}

// Error codes this package acts on.
const (
	codeNoMessage          = jetstream.JSErrCodeMessageNotFound                 // 10037
	codeStreamNotFound     = jetstream.JSErrCodeStreamNotFound                  // 10059
	codeWrongLastSeq       = jetstream.JSErrCodeStreamWrongLastSequence         // 10071
	codeWrongLastSeqConst  = jetstream.JSErrCodeStreamWrongLastSequenceConstant // 10164
	codeJSNotEnabled       = jetstream.JSErrCodeJetStreamNotEnabled             // 10076
	codeJSNotEnabledForAcc = jetstream.JSErrCodeJetStreamNotEnabledForAccount   // 10039
	codeLastSeqNotReady    = 10163                                              // expected last sequence per subject temporarily unavailable
	codeMsgTTLDisabled     = 10166                                              // per-message TTL is disabled
	codeNoPeers            = 10005                                              // no suitable peers for placement
	// No room to store a write (adr/0034): the server's storage limit (by
	// default a share of its disk), its disk's room for a stream, the
	// account's limit.
	codeInsufficientResources = 10023 // insufficient resources
	codeStorageExceeded       = 10047 // insufficient storage resources available
	codeAccountExceeded       = 10002 // resource limits exceeded for account
)

// storageFull reports a refusal for lack of storage.
func storageFull(e *jetstream.APIError) bool {
	if e == nil {
		return false
	}
	switch e.ErrorCode {
	case codeInsufficientResources, codeStorageExceeded, codeAccountExceeded:
		return true
	}
	return false
}

func isWrongLastSeq(e *jetstream.APIError) bool {
	return e != nil && e.ErrorCode == codeWrongLastSeq
}

// transient reports server answers worth retrying: the stream is electing a
// leader or catching up.
func transient(e *jetstream.APIError) bool {
	return e != nil && !storageFull(e) && (e.Code == 503 || e.ErrorCode == codeLastSeqNotReady)
}

// attemptCtx bounds one request inside a call, so that a lost answer leaves
// time to retry and to find out whether the write landed.
// An attempt never takes more than three quarters of what is left, so a
// re-read always has time to find out.
func (c *Client) attemptCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := max(c.timeout/2, 250*time.Millisecond)
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)*3/4)
	}
	return context.WithTimeout(ctx, d)
}

// requestError maps a failed request to this package's sentinels.
func (c *Client) requestError(what string, err error) error {
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w: %w: %s: the value is larger than the server accepts (%d bytes): %w", ErrInvalidConfig, ErrTooLarge, what, c.nc.MaxPayload(), err)
	case errors.Is(err, nats.ErrPermissionViolation):
		return fmt.Errorf("%w: %s on %s: %w", ErrPermission, what, c.url, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		if last := c.nc.LastError(); last != nil && errors.Is(last, nats.ErrPermissionViolation) ||
			last != nil && strings.Contains(strings.ToLower(last.Error()), "permissions violation") {
			return fmt.Errorf("%w: %s on %s: %w", ErrPermission, what, c.url, last)
		}
		return fmt.Errorf("%w: %s: no answer from %s in time: %w", ErrUnavailable, what, c.url, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", what, err)
	default:
		return fmt.Errorf("%w: %s on %s: %w", ErrUnavailable, what, c.url, err)
	}
}

// apiError maps an error from the jetstream package's management calls.
func (c *Client) apiError(what string, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w: %s on %s: %w", ErrBucketNotFound, what, c.url, err)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w: %s on %s: %w", ErrJetStreamDisabled, what, c.url, err)
	case errors.As(err, &apiErr) && storageFull(apiErr):
		return fmt.Errorf("%w: %s on %s refused: %w", ErrStorageFull, what, c.url, err)
	case errors.As(err, &apiErr):
		return fmt.Errorf("%s on %s: %w", what, c.url, err)
	default:
		return c.requestError(what, err)
	}
}

// call sends a JetStream API request and decodes the answer into out (which
// embeds apiResponse). It is for reads only: a transient answer (503, a
// stream or the meta group between leaders) is asked again until ctx ends,
// and then returned in out like any other API error.
func (c *Client) call(ctx context.Context, what, subj string, req, out any) error {
	var data []byte
	if req != nil {
		var err error
		if data, err = json.Marshal(req); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	backoff := 10 * time.Millisecond
	var transientData []byte // the last transient answer
	for {
		actx, cancel := c.attemptCtx(ctx)
		w := c.refusals.begin(subj, cancel)
		resp, err := c.nc.RequestWithContext(actx, subj, data)
		err = c.refusals.end(w, err)
		cancel()
		if err == nil && c.readsUnavailable.Load() > 0 && c.readsUnavailable.Add(-1) >= 0 {
			resp.Data = []byte(`{"error":{"code":503,"description":"JetStream system temporarily unavailable"}}`) // fault injection (tests)
		}
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("%w: %s on %s: %w", ErrJetStreamDisabled, what, c.url, err)
		}
		if err != nil {
			if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
				continue // reads are safe to repeat
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && transientData != nil {
				// Out of time while asking again: the answer that says why.
				resp, err = &nats.Msg{Data: transientData}, nil
			} else {
				if ctx.Err() != nil {
					err = ctx.Err() // the caller's context ended, whatever ended the attempt
				}
				return c.requestError(what, err)
			}
		}
		if transientAnswer(resp.Data) && ctx.Err() == nil {
			transientData = resp.Data
			// The stream or the meta group is between leaders: a read is safe
			// to repeat, after a pause, until the call's deadline.
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
				backoff = min(2*backoff, 250*time.Millisecond)
				c.readRetries.Add(1)
				continue
			}
		}
		if err := json.Unmarshal(resp.Data, out); err != nil {
			return fmt.Errorf("%s: undecodable answer from %s: %w", what, c.url, err)
		}
		return nil
	}
}

// transientAnswer reports an API answer that is a transient error (see
// transient). Answers without an "error" key are not decoded twice.
func transientAnswer(data []byte) bool {
	if !bytes.Contains(data, []byte(`"error"`)) {
		return false
	}
	var probe apiResponse
	return json.Unmarshal(data, &probe) == nil && transient(probe.Error)
}

type streamInfoResponse struct {
	apiResponse
	jetstream.StreamInfo
}

// streamInfo reads a stream's configuration and the server's time.
func (c *Client) streamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error) {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	var resp streamInfoResponse
	what := "read bucket " + strings.TrimPrefix(stream, "KV_")
	if err := c.call(ctx, what, apiPrefix+"STREAM.INFO."+stream, nil, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, c.streamError(what, resp.Error)
	}
	return &resp.StreamInfo, nil
}

func (c *Client) streamError(what string, e *jetstream.APIError) error {
	switch e.ErrorCode {
	case codeStreamNotFound:
		return fmt.Errorf("%w: %s on %s: %w", ErrBucketNotFound, what, c.url, e)
	case codeJSNotEnabled, codeJSNotEnabledForAcc:
		return fmt.Errorf("%w: %s on %s: %w", ErrJetStreamDisabled, what, c.url, e)
	case codeMsgTTLDisabled:
		return fmt.Errorf("%w: %s on %s: the bucket does not allow per-key TTLs: %w", ErrBucketMismatch, what, c.url, e)
	}
	if storageFull(e) {
		return fmt.Errorf("%w: %s on %s refused: %w", ErrStorageFull, what, c.url, e)
	}
	if e.Code == 403 || strings.Contains(strings.ToLower(e.Description), "permission") {
		return fmt.Errorf("%w: %s on %s: %w", ErrPermission, what, c.url, e)
	}
	if transient(e) {
		return fmt.Errorf("%w: %s on %s: %w", ErrUnavailable, what, c.url, e)
	}
	return fmt.Errorf("%s on %s: %w", what, c.url, e)
}

// storedMsg is a message as STREAM.MSG.GET returns it.
type storedMsg struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Header  []byte    `json:"hdrs,omitempty"`
	Data    []byte    `json:"data,omitempty"`
	Time    time.Time `json:"time"`
}

type msgGetResponse struct {
	apiResponse
	Message *storedMsg `json:"message,omitempty"`
}

type pubAckResponse struct {
	apiResponse
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
}
