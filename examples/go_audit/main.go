// Command go_audit checks a converge store's evidence with Go's transparency-log
// packages (golang.org/x/mod/sumdb/note and sumdb/tlog) and nothing of converge:
// the steps of docs/audit-format.md, "Checking a store with tools that are not ours".
//
//	go_audit open VKEY CHECKPOINT [WITNESS_VKEY]   the checkpoint's signature (and a witness's cosignature)
//	go_audit record VKEY BUNDLE                    the run's ledger entry is in the bundle's checkpoint
//	go_audit tree VKEY OLD NEW PROOF               NEW extends OLD (PROOF: base64 hashes, one a line)
//	go_audit redactions BUNDLE                     each redacted fact is the one its fact_redacted event names
//
// VKEY and WITNESS_VKEY are files holding a verifier key (converge.vkey). It prints
// one line and exits 0 when the check holds, 1 with the reason when it does not.
// Build offline with Debian's packages:
//
//	GOPATH=/usr/share/gocode GO111MODULE=off go build -o go_audit main.go
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// checkpoint is the text of a C2SP tlog-checkpoint: origin, tree size, root hash.
type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// cosigner verifies C2SP tlog-cosignature/v1 signatures (type 0x04), which
// sumdb/note does not know: 8-byte time || Ed25519 over "cosignature/v1\ntime T\n" || text.
type cosigner struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (c *cosigner) Name() string    { return c.name }
func (c *cosigner) KeyHash() uint32 { return c.hash }
func (c *cosigner) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	signed := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), msg...)
	return ed25519.Verify(c.key, signed, sig[8:])
}

func newCosigner(vkey string) (*cosigner, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, errors.New("malformed witness verifier key")
	}
	key, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(key) != 1+ed25519.PublicKeySize || key[0] != 0x04 {
		return nil, errors.New("not a witness verifier key (type 0x04)")
	}
	sum := sha256.Sum256(append([]byte(parts[0]+"\n"), key...))
	if hex.EncodeToString(sum[:4]) != parts[1] {
		return nil, errors.New("witness verifier key: its key hash is not the key's")
	}
	return &cosigner{parts[0], binary.BigEndian.Uint32(sum[:4]), ed25519.PublicKey(key[1:])}, nil
}

func readFile(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		fail(err)
	}
	return data
}

func fail(err error) {
	fmt.Println("FAILED:", err)
	os.Exit(1)
}

// open verifies msg with the log's key (and the witness's, when given) and parses its text.
func open(vkeyFile string, msg []byte, witnessFile string) checkpoint {
	log, err := note.NewVerifier(strings.TrimSpace(string(readFile(vkeyFile))))
	if err != nil {
		fail(err)
	}
	known := []note.Verifier{log}
	var witness *cosigner
	if witnessFile != "" {
		if witness, err = newCosigner(strings.TrimSpace(string(readFile(witnessFile)))); err != nil {
			fail(err)
		}
		known = append(known, witness)
	}
	n, err := note.Open(msg, note.VerifierList(known...))
	if err != nil {
		fail(err)
	}
	if witness != nil {
		found := false
		for _, s := range n.Sigs {
			found = found || (s.Name == witness.name && s.Hash == witness.hash)
		}
		if !found {
			fail(errors.New("no cosignature by " + witness.name))
		}
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 {
		fail(errors.New("not a checkpoint: origin, size and root lines expected"))
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		fail(errors.New("not a checkpoint: bad tree size"))
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		fail(err)
	}
	return checkpoint{lines[0], size, root}
}

func hashes(encoded []string, decode func(string) ([]byte, error)) []tlog.Hash {
	var out []tlog.Hash
	for _, s := range encoded {
		raw, err := decode(s)
		if err != nil || len(raw) != tlog.HashSize {
			fail(fmt.Errorf("not a 32-byte hash: %q", s))
		}
		var h tlog.Hash
		copy(h[:], raw)
		out = append(out, h)
	}
	return out
}

// record checks the bundle's ledger entry against the checkpoint the bundle carries.
func record(vkeyFile, bundleFile string) {
	var b struct {
		Checkpoint string `json:"ledger_checkpoint"`
		Ledger     struct {
			Entry struct {
				Head    string `json:"head"`
				LastSeq int64  `json:"last_seq"`
				RunID   string `json:"run_id"`
				Seq     int64  `json:"seq"`
			} `json:"entry"`
			Index int64    `json:"index"`
			Proof []string `json:"proof"`
		} `json:"ledger"`
	}
	if err := json.Unmarshal(readFile(bundleFile), &b); err != nil {
		fail(err)
	}
	c := open(vkeyFile, []byte(b.Checkpoint), "")
	// the leaf's data: the entry as canonical JSON (sorted keys, compact, UTF-8 kept)
	var msg bytes.Buffer
	enc := json.NewEncoder(&msg)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b.Ledger.Entry); err != nil {
		fail(err)
	}
	data := bytes.TrimSuffix(msg.Bytes(), []byte("\n"))
	proof := hashes(b.Ledger.Proof, hex.DecodeString)
	if err := tlog.CheckRecord(proof, c.size, c.root, b.Ledger.Index, tlog.RecordHash(data)); err != nil {
		fail(err)
	}
	fmt.Printf("ok: ledger entry %d (run %s) is record %d of %s at size %d\n",
		b.Ledger.Entry.Seq, b.Ledger.Entry.RunID, b.Ledger.Index, c.origin, c.size)
}

// tree checks that the checkpoint in newFile extends the one in oldFile.
func tree(vkeyFile, oldFile, newFile, proofFile string) {
	old, cur := open(vkeyFile, readFile(oldFile), ""), open(vkeyFile, readFile(newFile), "")
	if old.origin != cur.origin {
		fail(errors.New("the checkpoints are of two logs"))
	}
	proof := hashes(strings.Fields(string(readFile(proofFile))), base64.StdEncoding.DecodeString)
	if err := tlog.CheckTree(proof, cur.size, cur.root, old.size, old.root); err != nil {
		fail(err)
	}
	fmt.Printf("ok: %s at size %d extends size %d\n", cur.origin, cur.size, old.size)
}

// stored is a fact as a run holds it (a fact_promoted payload, an initial fact).
type stored struct {
	seq  int
	fact map[string]any
}

// redactions ties each redacted fact of a run bundle to its chained fact_redacted
// event, as converge's verify does and in its words (docs/audit-format.md,
// "Redactions"): a chain of format 2 hashes a fact by its commitment alone, so a
// marker edited, a fact blanked by hand or a content put back passes the chain.
// It checks neither the chain nor the signatures: verify-bundle does.
func redactions(bundleFile string) {
	var b struct {
		Run struct {
			Chain string `json:"chain"`
		} `json:"run"`
		Events []struct {
			Kind    string `json:"kind"`
			Payload string `json:"payload"`
		} `json:"events"`
	}
	if err := json.Unmarshal(readFile(bundleFile), &b); err != nil {
		fail(err)
	}
	at := func(seq int, why string, args ...any) {
		fail(fmt.Errorf("event seq %d: "+why, append([]any{seq}, args...)...))
	}
	salted := strings.HasSuffix(b.Run.Chain, "/2") // format 2: facts may be redacted
	events := map[string]stored{}
	var order []string
	var facts []stored
	for i, e := range b.Events {
		seq := i + 1
		switch {
		case e.Kind == "fact_redacted":
			var p map[string]any
			_ = json.Unmarshal([]byte(e.Payload), &p)
			fid, ok := p["fact_id"].(string)
			if !ok {
				at(seq, "fact_redacted names no fact")
			}
			if _, twice := events[fid]; twice {
				at(seq, "fact %s is redacted twice", fid)
			}
			events[fid] = stored{seq, p}
			order = append(order, fid)
		case !salted || !strings.Contains(e.Payload, `"redacted":{`):
		case e.Kind == "fact_promoted":
			var f map[string]any
			if json.Unmarshal([]byte(e.Payload), &f) == nil {
				facts = append(facts, stored{seq, f})
			}
		case e.Kind == "run_started":
			var p struct {
				Initial []any `json:"initial_facts"`
			}
			_ = json.Unmarshal([]byte(e.Payload), &p)
			for _, f := range p.Initial {
				if m, ok := f.(map[string]any); ok {
					facts = append(facts, stored{seq, m})
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, s := range facts {
		fid, ok := s.fact["id"].(string)
		content, isMap := s.fact["content"].(map[string]any)
		if !ok || !isMap {
			continue
		}
		marker, marked := content["redacted"]
		if _, committed := s.fact["commitment"]; !marked || !committed {
			continue
		}
		seen[fid] = true
		ev, found := events[fid]
		if !found {
			at(s.seq, "fact %s is redacted without a fact_redacted event", fid)
		}
		if !reflect.DeepEqual(s.fact["commitment"], ev.fact["commitment"]) {
			at(s.seq, "fact %s's commitment differs from its fact_redacted (seq %d)", fid, ev.seq)
		}
		want := map[string]any{"at": ev.fact["at"], "by": ev.fact["by"], "reason": ev.fact["reason"]}
		if !reflect.DeepEqual(marker, want) {
			at(s.seq, "fact %s's redaction marker differs from its fact_redacted (seq %d)", fid, ev.seq)
		}
	}
	for _, fid := range order {
		if !seen[fid] {
			at(events[fid].seq, "fact_redacted names fact %s, which the run does not hold redacted", fid)
		}
	}
	fmt.Printf("ok: %d redacted facts, each its fact_redacted event's\n", len(order))
}

func main() {
	args := os.Args[1:]
	switch {
	case len(args) >= 3 && len(args) <= 4 && args[0] == "open":
		witness := ""
		if len(args) == 4 {
			witness = args[3]
		}
		c := open(args[1], readFile(args[2]), witness)
		fmt.Printf("ok: %s at size %d, root %s\n", c.origin, c.size, c.root)
	case len(args) == 3 && args[0] == "record":
		record(args[1], args[2])
	case len(args) == 5 && args[0] == "tree":
		tree(args[1], args[2], args[3], args[4])
	case len(args) == 2 && args[0] == "redactions":
		redactions(args[1])
	default:
		fmt.Fprintln(os.Stderr, "usage: go_audit open VKEY CHECKPOINT [WITNESS_VKEY] | record VKEY BUNDLE | tree VKEY OLD NEW PROOF | redactions BUNDLE")
		os.Exit(2)
	}
}
