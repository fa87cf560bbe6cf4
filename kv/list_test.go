package kv_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
)

// A listing in the stream's order holds every live entry once, by
// revision, whether it had room for them all from the start or had to take
// more as they came; Entries lists the same, values included.
func TestEntriesDecoded_StreamOrderWhateverItsRoom(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	const n = 1000
	revs := map[string]uint64{}
	// Keys of three TTLs, in runs and alone.
	ttlOf := func(i int) time.Duration { return []time.Duration{0, time.Minute, time.Hour}[i/7%3] }
	for _, i := range rand.Perm(n) {
		key := fmt.Sprintf("k%04d", i)
		rev, err := b.Create(ctx, key, []byte(strconv.Itoa(i)), ttlOf(i))
		if err != nil {
			t.Fatal(err)
		}
		revs[key] = rev
	}
	// Rewrites and deletes move keys about the stream.
	for i := 0; i < n; i += 7 {
		key := fmt.Sprintf("k%04d", i)
		if i%2 == 0 {
			if err := b.Delete(ctx, key, revs[key], nil); err != nil {
				t.Fatal(err)
			}
			delete(revs, key)
			continue
		}
		rev, err := b.Update(ctx, key, []byte(strconv.Itoa(i)), ttlOf(i), revs[key])
		if err != nil {
			t.Fatal(err)
		}
		revs[key] = rev
	}
	decode := func(e kv.Entry) (int, error) { return strconv.Atoi(string(e.Value)) }
	all, err := kv.EntriesDecoded(ctx, b, "", decode)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, ds []kv.Decoded[int]) {
		t.Helper()
		if len(ds) != len(revs) {
			t.Fatalf("%s: %d entries, want %d", name, len(ds), len(revs))
		}
		for i, d := range ds {
			if i > 0 && ds[i-1].Entry.Revision >= d.Entry.Revision {
				t.Fatalf("%s: not in the stream's order at %d: revision %d after %d", name, i, d.Entry.Revision, ds[i-1].Entry.Revision)
			}
			want, _ := strconv.Atoi(d.Entry.Key[1:])
			if d.Entry.Revision != revs[d.Entry.Key] || d.Err != nil || d.Out != want || d.Entry.Value != nil || d.Entry.TTL != ttlOf(want) {
				t.Fatalf("%s: %+v, want revision %d decoded to %d, TTL %s", name, d, revs[d.Entry.Key], want, ttlOf(want))
			}
		}
	}
	check("room for all", all)
	for _, room := range []int{0, 1, 10, 300} {
		ds, err := kv.EntriesDecodedInRoom(ctx, b, "", room, decode)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("room for %d", room), ds)
	}
	es, err := b.Entries(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(all) {
		t.Fatalf("Entries has %d, EntriesDecoded %d", len(es), len(all))
	}
	for i, e := range es {
		if e.Key != all[i].Entry.Key || e.Revision != all[i].Entry.Revision || e.TTL != all[i].Entry.TTL || string(e.Value) != strconv.Itoa(all[i].Out) {
			t.Fatalf("Entries[%d] = %s@%d %q, EntriesDecoded has %s@%d", i, e.Key, e.Revision, e.Value, all[i].Entry.Key, all[i].Entry.Revision)
		}
	}
}

// Sorting a listing by key keeps each entry with what its decode made of
// it, in any order it came.
func TestSortByKey_KeepsEachEntryWithItsResult(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 3, 100, 1000} {
		for round := range 5 {
			// Keys of every length, many sharing their first eight bytes.
			ds := make([]kv.Decoded[int], n)
			keys := make([]string, n)
			for i := range ds {
				keys[i] = strings.Repeat("k", i%11) + fmt.Sprintf("%05d", i)
			}
			slices.Sort(keys)
			for i := range ds {
				ds[i] = kv.Decoded[int]{Entry: kv.Entry{Key: keys[i], Revision: uint64(i)}, Out: i}
			}
			switch round {
			case 0: // sorted already
			case 1:
				slices.Reverse(ds)
			default:
				rng.Shuffle(n, func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
			}
			kv.SortByKey(ds)
			for i, d := range ds {
				if d.Entry.Key != keys[i] || d.Out != i || d.Entry.Revision != uint64(i) {
					t.Fatalf("n=%d round %d: at %d: %+v", n, round, i, d)
				}
			}
		}
	}
}

func TestList_LiveEntriesInOneWatch(t *testing.T) {
	ctx := context.Background()
	c, b := testBucket(t)
	const n = 300
	var gone uint64
	for i := range n {
		rev, err := b.Create(ctx, fmt.Sprintf("k%03d", i), []byte("v"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			gone = rev
		}
	}
	if err := b.Delete(ctx, "k007", gone, nil); err != nil {
		t.Fatal(err)
	}
	before := outMsgs(c)
	es, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sent := outMsgs(c) - before; sent > 10 {
		t.Errorf("list sent %d messages for %d keys; want a handful (one watch)", sent, n)
	}
	if len(es) != n-1 {
		t.Fatalf("list has %d entries, want %d", len(es), n-1)
	}
	for i := 1; i < len(es); i++ {
		if es[i-1].Key >= es[i].Key {
			t.Fatalf("not sorted at %d: %s >= %s", i, es[i-1].Key, es[i].Key)
		}
		if es[i].Key == "k007" {
			t.Fatal("deleted key listed")
		}
	}
}

// ListDecoded decodes every live entry once, on several goroutines while
// the listing arrives, keeps each entry's own error, skips tombstones and
// returns the whole in key order; a listing whose context ends fails.
func TestListDecoded_EveryLiveEntryOnceInKeyOrder(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	const n = 1000 // several batches
	keys := rand.Perm(n)
	var gone uint64
	for _, i := range keys {
		rev, err := b.Create(ctx, fmt.Sprintf("k%04d", i), []byte(strconv.Itoa(i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			gone = rev
		}
	}
	if err := b.Delete(ctx, "k0007", gone, nil); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	bad := errors.New("a multiple of 100")
	ds, err := kv.ListDecoded(ctx, b, "", func(e kv.Entry) (int, error) {
		calls.Add(1)
		v, err := strconv.Atoi(string(e.Value))
		if err == nil && v%100 == 0 {
			return 0, bad
		}
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != n-1 || calls.Load() != n-1 {
		t.Fatalf("%d results from %d decodes, want %d of each", len(ds), calls.Load(), n-1)
	}
	for i, d := range ds {
		if i > 0 && ds[i-1].Entry.Key >= d.Entry.Key {
			t.Fatalf("not in key order at %d: %s >= %s", i, ds[i-1].Entry.Key, d.Entry.Key)
		}
		if d.Entry.Value != nil {
			t.Fatalf("%s: the listing kept the record's bytes beside what decode made of them", d.Entry.Key)
		}
		want, _ := strconv.Atoi(strings.TrimPrefix(d.Entry.Key, "k"))
		switch {
		case want == 7:
			t.Fatal("a deleted key was listed")
		case want%100 == 0 && !errors.Is(d.Err, bad):
			t.Errorf("%s: error %v, want its decode's", d.Entry.Key, d.Err)
		case want%100 != 0 && (d.Err != nil || d.Out != want):
			t.Errorf("%s decoded to %d, %v; want %d", d.Entry.Key, d.Out, d.Err, want)
		}
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := kv.ListDecoded(done, b, "", func(kv.Entry) (int, error) { return 0, nil }); err == nil {
		t.Error("a listing with its context done succeeded")
	}
}
