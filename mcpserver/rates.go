package mcpserver

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/rate"
)

// TakeRateInput is take_rate's arguments.
type TakeRateInput struct {
	Name        string  `json:"name" jsonschema:"the rate limiter (made with baton rate create NAME)"`
	Cost        int64   `json:"cost,omitempty" jsonschema:"what the call will cost in what the limiter counts (tokens, say); default 1"`
	ID          string  `json:"id,omitempty" jsonschema:"an id for the take, to settle its real cost later; default a new one"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"how long to wait for room, at most 300; default 0: answer at once"`
}

// TakeRateOutput is take_rate's result.
type TakeRateOutput struct {
	Admitted     bool   `json:"admitted" jsonschema:"true when you may make the call now"`
	ID           string `json:"id,omitempty" jsonschema:"the take's id, when admitted"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty" jsonschema:"when refused: wait this long before asking again"`
	Reason       string `json:"reason,omitempty" jsonschema:"why it was refused: limited, not_found, invalid or unavailable"`
	Lost
}

// RateStatusInput is rate_status's arguments.
type RateStatusInput struct {
	Name string `json:"name" jsonschema:"the rate limiter"`
}

// RateLimitUse is one limit of a limiter and its use now.
type RateLimitUse struct {
	Max    int64  `json:"max"`
	Period string `json:"period" jsonschema:"the window, as 1m0s"`
	Burst  int64  `json:"burst,omitempty"`
	Per    string `json:"per" jsonschema:"what it counts: cost (each take's cost) or take (each take as one)"`
	Used   int64  `json:"used" jsonschema:"counted in the window ending now"`
	Left   int64  `json:"left" jsonschema:"what a take may still cost now"`
}

// RateStatusOutput is rate_status's result.
type RateStatusOutput struct {
	Name   string         `json:"name,omitempty"`
	Limits []RateLimitUse `json:"limits,omitempty"`
	Takes  int            `json:"takes" jsonschema:"takes still inside the longest period"`
	Lost
}

func (s *Server) addRateTools() {
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "take_rate",
		Title: "Take from a rate limiter",
		Description: `Ask a shared rate limiter (an LLM provider's requests and tokens a minute, an API's calls a second) for room before making a call it limits.
If admitted, make the call. If refused (isError, reason "limited"), do not make it: wait retry_after_ms and ask again, or pass wait_seconds to have this server wait.`,
	}, tool(s, s.takeRate))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "rate_status",
		Title:       "Rate limiter status",
		Description: `Show a rate limiter's limits and what each has used in its window now.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.rateStatus))
}

func (s *Server) limiters(ctx context.Context) (*rate.Limiters, error) {
	c, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	if c.Limiters == nil {
		return nil, errors.New("this server was started without rate limiters")
	}
	return c.Limiters, nil
}

func (s *Server) takeRate(ctx context.Context, _ *mcp.CallToolRequest, in TakeRateInput) (*mcp.CallToolResult, TakeRateOutput, error) {
	lost := s.drainLost()
	out := TakeRateOutput{Lost: lost}
	if in.WaitSeconds < 0 || in.WaitSeconds > 300 {
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: wait_seconds %g: want 0 to 300", in.WaitSeconds), lost), out, nil
	}
	ls, err := s.limiters(ctx)
	if err != nil {
		out.Reason = "unavailable"
		return withLost(unavailable("take_rate "+in.Name, err), lost), out, nil
	}
	opts := []rate.TakeOption{}
	if in.Cost != 0 {
		opts = append(opts, rate.WithCost(in.Cost))
	}
	if in.ID != "" {
		opts = append(opts, rate.WithID(in.ID))
	}
	var a *rate.Admission
	if in.WaitSeconds > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitSeconds*float64(time.Second)))
		a, err = ls.TakeWait(wctx, in.Name, opts...)
		cancel()
	} else {
		a, err = ls.Take(ctx, in.Name, opts...)
	}
	var le *rate.LimitedError
	switch {
	case errors.As(err, &le):
		out.Reason, out.RetryAfterMS = "limited", max(le.RetryAfter.Milliseconds(), 1)
		return withLost(refusal("%s has no room for this call now: do not make it; ask again in %s", in.Name, le.RetryAfter.Round(time.Millisecond)), lost), out, nil
	case errors.Is(err, rate.ErrNotFound):
		out.Reason = "not_found"
		return withLost(refusal("no rate limiter %s: ask an operator to make it (baton rate create %s --limit N/PERIOD)", in.Name, in.Name), lost), out, nil
	case errors.Is(err, rate.ErrInvalid):
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		out.Reason = "unavailable"
		return withLost(unavailable("take_rate "+in.Name, err), lost), out, nil
	}
	out.Admitted, out.ID = true, a.ID
	return summary(lost, "admitted: make the call (take %s, cost %d)", a.ID, a.Cost), out, nil
}

func (s *Server) rateStatus(ctx context.Context, _ *mcp.CallToolRequest, in RateStatusInput) (*mcp.CallToolResult, RateStatusOutput, error) {
	lost := s.drainLost()
	out := RateStatusOutput{Lost: lost}
	ls, err := s.limiters(ctx)
	if err != nil {
		return withLost(unavailable("rate_status "+in.Name, err), lost), out, nil
	}
	st, err := ls.Status(ctx, in.Name)
	switch {
	case errors.Is(err, rate.ErrNotFound):
		return withLost(refusal("no rate limiter %s", in.Name), lost), out, nil
	case errors.Is(err, rate.ErrInvalid):
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("rate_status "+in.Name, err), lost), out, nil
	}
	out.Name, out.Takes = st.Name, len(st.Takes)
	for _, u := range st.Uses {
		out.Limits = append(out.Limits, RateLimitUse{Max: u.Max, Period: time.Duration(u.Period).String(), Burst: u.Burst, Per: u.Per, Used: u.Used, Left: u.Left})
	}
	text := in.Name + ":"
	for _, u := range st.Uses {
		text += " " + rate.Describe([]rate.Limit{u.Limit}) + " used " + itoa(u.Used) + ", left " + itoa(u.Left) + ";"
	}
	return summary(lost, "%s", text), out, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
