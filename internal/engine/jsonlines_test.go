package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
)

// Lines encoded on several goroutines come out in the order they were
// queued, each as encoding it in place would write it, packet bytes
// included, across batches and flushes.
func TestJSONLinesKeepTheirOrder(t *testing.T) {
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	events := incidentStream(60)
	var want bytes.Buffer
	var got bytes.Buffer
	j := newJSONLines(&got, names, output.TimelinesAll)
	for i := range events {
		e := events[i]
		e.Packet = []byte{byte(i), byte(i >> 8), 0x45}[:i%4%3+1]
		want.Write(append(names.AppendEvent(nil, &e), '\n'))
		j.Event(&e)
		e.Packet[0] ^= 0xff // the reader's buffer, reused
		if i%100 == 0 {
			marker := map[string]int{"marker": i}
			line, _ := json.Marshal(marker)
			want.Write(append(line, '\n'))
			j.Raw(marker)
		}
		if i%777 == 0 {
			j.Flush()
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if len(events) < 4*jsonBatchLines {
		t.Fatalf("%d events fill few batches: the test shows little", len(events))
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("wrote %d bytes, in place %d; first difference at byte %d", got.Len(), want.Len(), firstDiff(got.Bytes(), want.Bytes()))
	}
}
