package queue

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/batonhq/baton/kv"
)

// A queue's workers do not each watch the queue. One of them, elected, is
// its dispatcher: it keeps the index of the queue and the key locks and
// offers each worker the tasks it is to claim (adr/0035). These are the
// records between them, in the queues bucket beside the tasks.

// inbox is what the dispatcher has for one worker (key <queue>.inbox.<id>):
// the tasks it offers it and the attempts it runs that it must stop. Each
// write holds everything still outstanding, so a worker that reads only the
// latest misses nothing.
//
//jsonrec:codec
type inbox struct {
	Queue      string      `json:"queue"`
	Worker     string      `json:"worker"`
	Dispatcher string      `json:"dispatcher"`
	Offers     []*offer    `json:"offers"`
	Stops      []*stopNote `json:"stops,omitempty"`
}

// offer is a task the dispatcher picked for a worker: the worker claims it
// as it would a task it had picked itself (adr/0020), on the lane and with
// the capacity token named. An offer the view was wrong about loses the
// claim's compare-and-set, as a race between two workers does.
type offer struct {
	Task      string `json:"task"`
	Rev       uint64 `json:"rev"`
	Key       string `json:"key"`
	Lane      int    `json:"lane"`
	Token     int    `json:"token"`
	SlotLast  uint64 `json:"slot_last,omitempty"`
	TokenLast uint64 `json:"token_last,omitempty"`
	// Body is the task's record at Rev when the dispatcher kept it (small
	// ones): the claim then needs no read.
	Body []byte `json:"body,omitempty"`
}

// stopNote asks the worker running attempt Fence of Task to stop it: it
// was cancelled, or its lock, token or task is no longer its own.
type stopNote struct {
	Task   string `json:"task"`
	Fence  uint64 `json:"fence"`
	Cancel bool   `json:"cancel,omitempty"`
}

// maxOfferBody bounds the task records an offer carries.
const maxOfferBody = 4 << 10

// newWorkerID is a worker's id in its queue: random, and a valid key part.
func newWorkerID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func decodeInbox(q, worker string, e kv.Entry) (*inbox, error) {
	var in inbox
	if !in.decodeFast(e.Value, 0) {
		in = inbox{}
		if err := json.Unmarshal(e.Value, &in); err != nil {
			return nil, err
		}
	}
	if in.Queue != q || in.Worker != worker {
		return nil, fmt.Errorf("record names worker %q of queue %q, stored as %q", in.Worker, in.Queue, e.Key)
	}
	return &in, nil
}

// encode is json.Marshal(in), member by member where it can be.
func (in *inbox) encode() ([]byte, error) {
	if b, ok := in.encodeFast(); ok {
		return b, nil
	}
	return json.Marshal(in)
}

// pickOf is the pick an offer names.
func (o offer) pickOf(cfg Config) pick {
	return pick{id: o.Task, rev: o.Rev, lane: o.Lane, slot: cfg.Slot(o.Key, o.Lane), token: o.Token, body: o.Body,
		slotLast: o.SlotLast, tokenLast: o.TokenLast}
}

// offerOf is the offer of pick pk.
func offerOf(pk pick) *offer {
	o := &offer{Task: pk.id, Rev: pk.rev, Key: pk.key.name, Lane: pk.lane, Token: pk.token, SlotLast: pk.slotLast, TokenLast: pk.tokenLast}
	if len(pk.body) <= maxOfferBody {
		o.Body = pk.body
	}
	return o
}
