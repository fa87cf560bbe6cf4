package kv_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
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
