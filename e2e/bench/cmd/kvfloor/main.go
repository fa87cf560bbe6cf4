// Command kvfloor is the floor for a cold baton CLI verb: a process that
// connects to NATS and does one JetStream KV write with a compare-and-set,
// nothing else. It reads the value from stdin and prints the new revision.
//
//	kvfloor URL create|update|purge SUBJECT [REVISION] < value
//
// For a batch (baton queue add --batch), it reads lines "KEY<tab>VALUE"
// from stdin and creates SUBJECT_PREFIX<KEY> with each VALUE, published
// asynchronously and awaited, printing each revision:
//
//	kvfloor URL batch SUBJECT_PREFIX < lines
//
// For a verb that reads one record (baton reserve check), it reads the
// last message of SUBJECT from the stream leader (STREAM.MSG.GET, as
// baton reads), decodes the answer and prints the value's size:
//
//	kvfloor URL get STREAM SUBJECT
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kvfloor:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("usage: kvfloor URL create|update|purge SUBJECT [REVISION] < value")
	}
	url, op, subject := args[0], args[1], args[2]
	switch op {
	case "batch":
		return batch(url, subject)
	case "get":
		if len(args) != 4 {
			return fmt.Errorf("usage: kvfloor URL get STREAM SUBJECT")
		}
		return get(url, args[2], args[3])
	}
	expect := "0"
	if op != "create" {
		if len(args) != 4 {
			return fmt.Errorf("%s needs the revision to compare with", op)
		}
		expect = args[3]
	}
	value, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(subject)
	msg.Header.Set("Nats-Expected-Last-Subject-Sequence", expect)
	msg.Header.Set("Nats-TTL", "60s")
	switch op {
	case "create", "update":
		msg.Data = value
	case "purge":
		msg.Header.Set("KV-Operation", "PURGE")
		msg.Header.Set("Nats-Rollup", "sub")
	default:
		return fmt.Errorf("unknown operation %q", op)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	resp, err := nc.RequestMsg(msg, 5*time.Second)
	if err != nil {
		return err
	}
	var ack struct {
		Seq   uint64 `json:"seq"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return err
	}
	if ack.Error != nil {
		return fmt.Errorf("%s", ack.Error.Description)
	}
	fmt.Println(strconv.FormatUint(ack.Seq, 10))
	return nil
}

// batch creates a key per line of stdin, the creates published
// asynchronously, and waits for them all.
func batch(url, prefix string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var futures []jetstream.PubAckFuture
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			return fmt.Errorf("want KEY<tab>VALUE lines")
		}
		msg := nats.NewMsg(prefix + key)
		msg.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
		msg.Data = []byte(value)
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for _, f := range futures {
		select {
		case pa := <-f.Ok():
			fmt.Fprintln(out, pa.Sequence)
		case err := <-f.Err():
			return err
		case <-time.After(time.Minute):
			return fmt.Errorf("no answer within a minute")
		}
	}
	return nil
}

// get reads the last message of subject in stream and prints its size.
func get(url, stream, subject string) error {
	req, err := json.Marshal(map[string]string{"last_by_subj": subject})
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	resp, err := nc.Request("$JS.API.STREAM.MSG.GET."+stream, req, 5*time.Second)
	if err != nil {
		return err
	}
	var ans struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &ans); err != nil {
		return err
	}
	if ans.Error != nil {
		return fmt.Errorf("%s", ans.Error.Description)
	}
	if ans.Message == nil {
		return fmt.Errorf("no message for %s", subject)
	}
	fmt.Printf("revision %d, %d bytes\n", ans.Message.Seq, len(ans.Message.Data))
	return nil
}
