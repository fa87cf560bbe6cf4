package session

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// decodeRecordFast decodes a record as this version of baton encodes it:
// its known fields in their order, compact, strings without escapes. It is
// what listing 100k sessions spends most of its time on, and a general
// decoder, even json v2's, takes several microseconds a record where this
// takes a fraction of one. It reports false, having decoded nothing, for
// anything else (another order, an escape, a field of another version,
// space, a number JSON would not write this way): UnmarshalJSON then
// decodes it the general way. What it decodes, it decodes as the general
// way does (a test and a fuzz target compare them).
func decodeRecordFast(data []byte) (Record, bool) {
	p := fastParser{b: data}
	var r Record
	ok := p.lit(`{"slot":`) && p.str(&r.Slot) &&
		p.lit(`,"task_id":`) && p.str(&r.TaskID) &&
		p.lit(`,"agent_id":`) && p.str(&r.AgentID) &&
		p.lit(`,"host":`) && p.str(&r.Host) &&
		p.lit(`,"pid":`) && p.int(&r.PID)
	if !ok {
		return Record{}, false
	}
	if p.lit(`,"pid_start":`) && !p.str(&r.PIDStart) {
		return Record{}, false
	}
	ok = p.lit(`,"instance":`) && p.str(&r.Instance) &&
		p.lit(`,"fence":`) && p.uint(&r.Fence) &&
		p.lit(`,"started_at":`) && p.time(&r.StartedAt) &&
		p.lit(`,"renewed_at":`) && p.time(&r.RenewedAt) &&
		p.lit(`,"renewals":`) && p.uint(&r.Renewals) &&
		p.lit(`,"message":`) && p.str(&r.Message) &&
		p.lit(`,"result":`) && p.str(&r.Result) &&
		p.lit(`,"meta":`) && p.meta(&r.Meta) &&
		p.lit(`}`) && len(p.b) == 0
	if !ok {
		return Record{}, false
	}
	return r, true
}

// fastParser consumes b from the front.
type fastParser struct{ b []byte }

func (p *fastParser) lit(s string) bool {
	if len(p.b) < len(s) || string(p.b[:len(s)]) != s {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// raw takes a string's contents: no escapes, no control characters,
// valid UTF-8 (otherwise the general decoder's replacements apply).
func (p *fastParser) raw() ([]byte, bool) {
	if len(p.b) == 0 || p.b[0] != '"' {
		return nil, false
	}
	ascii := true
	for i := 1; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			s := p.b[1:i]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			p.b = p.b[i+1:]
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (p *fastParser) str(dst *string) bool {
	s, ok := p.raw()
	if ok {
		*dst = string(s)
	}
	return ok
}

// digits takes a JSON integer as encoding/json writes one: an optional
// minus, no leading zero, no fraction or exponent.
func (p *fastParser) digits(signed bool) ([]byte, bool) {
	i := 0
	if signed && len(p.b) > 0 && p.b[0] == '-' {
		i++
	}
	start := i
	for i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9' {
		i++
	}
	if i == start || p.b[start] == '0' && i > start+1 {
		return nil, false
	}
	if i < len(p.b) && (p.b[i] == '.' || p.b[i] == 'e' || p.b[i] == 'E') {
		return nil, false
	}
	n := p.b[:i]
	p.b = p.b[i:]
	return n, true
}

func (p *fastParser) int(dst *int) bool {
	n, ok := p.digits(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(n), 10, strconv.IntSize)
	*dst = int(v)
	return err == nil
}

func (p *fastParser) uint(dst *uint64) bool {
	n, ok := p.digits(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	*dst = v
	return err == nil
}

func (p *fastParser) time(dst *time.Time) bool {
	s, ok := p.raw()
	return ok && dst.UnmarshalText(s) == nil
}

// meta takes an object of strings; {} is an empty map, as decoding gives.
func (p *fastParser) meta(dst *map[string]string) bool {
	if !p.lit("{") {
		return false
	}
	m := map[string]string{}
	for i := 0; !p.lit("}"); i++ {
		if i > 0 && !p.lit(",") {
			return false
		}
		k, ok := p.raw()
		if !ok || !p.lit(":") {
			return false
		}
		v, ok := p.raw()
		if !ok {
			return false
		}
		m[string(k)] = string(v)
	}
	*dst = m
	return true
}
