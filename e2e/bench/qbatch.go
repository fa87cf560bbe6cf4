package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/queue"
)

// batchTasks is how many tasks one batch add carries.
const batchTasks = 10000

// queueBatchRows: adding 10,000 tasks at once, by `baton queue add
// --batch FILE` (the whole process) beside kvfloor (a process that reads
// the same records and publishes their creates asynchronously, awaited),
// and by the library's AddBatch beside the same publishes in process.
// Rounds alternate the sides.
func (b *bench) queueBatchRows(ctx context.Context, e *queueEnv) ([]row, error) {
	rounds := 3
	if b.quick {
		rounds = 1
	}
	for _, q := range []string{"batchc", "batchl"} {
		if _, _, err := e.qs.Create(ctx, queue.DefaultConfig(q)); err != nil {
			return nil, err
		}
	}
	payload := strings.Repeat("p", 100)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + mkdir(b.shm, "queue-batch-home"), "BATON_URL=" + b.nats.url,
		"BATON_STATE_DIR=" + mkdir(b.shm, "queue-batch-state"), "BATON_HOST_ID=batch-host", "BATON_PREFIX=" + queuePrefix}
	var lat [4]samples // the process, the library, the floor in process, the floor's process
	for r := range rounds {
		run := fmt.Sprintf("r%d-%s", r, strconv.FormatInt(time.Now().UnixNano(), 36))
		id := func(i int) string { return fmt.Sprintf("b-%s-%d", run, i) }
		key := func(i int) string { return fmt.Sprintf("k%d", i%100) }
		var file bytes.Buffer
		for i := range batchTasks {
			fmt.Fprintf(&file, `{"key":%q,"id":%q,"payload":%q}`+"\n", key(i), id(i), payload)
		}
		path := filepath.Join(b.shm, "batch-"+run+".jsonl")
		if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
			return nil, err
		}
		// The floor process's input: each task's record as baton writes it.
		var records bytes.Buffer
		for i := range batchTasks {
			fmt.Fprintf(&records, "p%s\t%s\n", id(i), taskRecord("batch", "p"+id(i), key(i), []byte(payload)))
		}
		steps := []func() error{
			func() error {
				cmd := exec.CommandContext(ctx, b.baton, "queue", "add", "batchc", "--batch", path)
				cmd.Env = env
				var errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = nil, &errb
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("baton queue add --batch: %w: %s", err, errb.String())
				}
				return nil
			},
			func() error {
				tasks := make([]queue.NewTask, batchTasks)
				for i := range tasks {
					tasks[i] = queue.NewTask{Key: key(i), Payload: []byte(payload), Options: []queue.AddOption{queue.WithID("l" + id(i))}}
				}
				res, err := e.qs.AddBatch(ctx, "batchl", tasks)
				if err != nil {
					return err
				}
				for _, a := range res {
					if a.Err != nil || !a.Added {
						return fmt.Errorf("task %v not added: %v", a.Task, a.Err)
					}
				}
				return nil
			},
			func() error { return floorBatch(ctx, e.c.Conn(), "f"+run, key, payload) },
			func() error {
				cmd := exec.CommandContext(ctx, b.kvfloor, b.nats.url, "batch", "$KV.floor-queue.batch.task.")
				cmd.Stdin = bytes.NewReader(records.Bytes())
				var errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = nil, &errb
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("kvfloor batch: %w: %s", err, errb.String())
				}
				return nil
			},
		}
		for _, s := range order(r, 4) {
			d, err := timeIt(steps[s])
			if err != nil {
				return nil, err
			}
			lat[s] = append(lat[s], d)
		}
		_ = os.Remove(path)
	}
	perSec := func(s samples) value { return val(batchTasks / s.median().Seconds()) }
	return []row{
		{metric: "queue add --batch of 10,000 tasks/s (baton queue add --batch FILE, the whole process; floor: kvfloor, a process that reads the records and publishes their creates async on one connection, awaited)", unit: unitRate,
			baton: perSec(lat[0]), floor: perSec(lat[3]), etcd: missing("—"), goal: []cond{toFloorAtLeast(0.8)}},
		{metric: "queue AddBatch of 10,000 tasks/s (the library, on a handle that knows the queue; floor: the same creates published async in process, awaited)", unit: unitRate,
			baton: perSec(lat[1]), floor: perSec(lat[2]), etcd: missing("—"), goal: []cond{toFloorAtLeast(0.8)}},
	}, nil
}

// floorBatch publishes the creates of batchTasks task records, without
// waiting for each acknowledgement, and waits for them all.
func floorBatch(ctx context.Context, nc *nats.Conn, run string, key func(int) string, payload string) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	for i := range batchTasks {
		id := fmt.Sprintf("%s-%d", run, i)
		msg := nats.NewMsg("$KV.floor-queue.batch.task." + id)
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		msg.Data = taskRecord("batch", id, key(i), []byte(payload))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			return err
		}
	}
	return awaitAsync(ctx, js, "batch records")
}
