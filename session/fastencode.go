package session

import (
	"slices"
	"strconv"

	"github.com/batonhq/baton/internal/jsonrec"
)

// encodeRecordFast writes r as the general way (jsonrec.Marshal of its
// fields, encoding/json's output) writes it, byte for byte, member by
// member, without reflection: a process that joins, commits or closes
// once pays encoding/json's first look at the type otherwise. It reports
// false for a record with fields of a later version (kept as read: the
// general way merges them) or a time encoding/json cannot write. A test
// and a fuzz target compare it with the general way.
func encodeRecordFast(r Record) ([]byte, bool) {
	if len(r.unknown) > 0 {
		return nil, false
	}
	b := make([]byte, 0, 320+len(r.Message)+len(r.TaskID)+32*len(r.Meta))
	b = append(b, `{"slot":`...)
	b = jsonrec.AppendString(b, r.Slot)
	b = append(b, `,"task_id":`...)
	b = jsonrec.AppendString(b, r.TaskID)
	b = append(b, `,"agent_id":`...)
	b = jsonrec.AppendString(b, r.AgentID)
	b = append(b, `,"host":`...)
	b = jsonrec.AppendString(b, r.Host)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(r.PID), 10)
	if r.PIDStart != "" {
		b = append(b, `,"pid_start":`...)
		b = jsonrec.AppendString(b, r.PIDStart)
	}
	b = append(b, `,"instance":`...)
	b = jsonrec.AppendString(b, r.Instance)
	b = append(b, `,"fence":`...)
	b = strconv.AppendUint(b, r.Fence, 10)
	var err error
	b = append(b, `,"started_at":`...)
	if b, err = jsonrec.AppendTime(b, r.StartedAt); err != nil {
		return nil, false
	}
	b = append(b, `,"renewed_at":`...)
	if b, err = jsonrec.AppendTime(b, r.RenewedAt); err != nil {
		return nil, false
	}
	b = append(b, `,"renewals":`...)
	b = strconv.AppendUint(b, r.Renewals, 10)
	b = append(b, `,"message":`...)
	b = jsonrec.AppendString(b, r.Message)
	b = append(b, `,"result":`...)
	b = jsonrec.AppendString(b, r.Result)
	b = append(b, `,"meta":{`...)
	keys := make([]string, 0, len(r.Meta))
	for k := range r.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonrec.AppendString(b, k)
		b = append(b, ':')
		b = jsonrec.AppendString(b, r.Meta[k])
	}
	return append(b, "}}"...), true
}
