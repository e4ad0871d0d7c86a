package dynamodb

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// av is one attribute value; item is one item (or key).
type av = types.AttributeValue
type item map[string]av

// Attribute names shared by several record types.
const (
	attrRecord = "record" // the record type: run, step, ...
	attrWID    = "wid"    // the write id of the create that made the item (newWID)
	// attrCounted marks a run created with visit counts (its steps'
	// nodes each have a visits# item once visited; lastVisit).
	attrCounted = "visit_counts"
)

// The sort keys and key prefixes (package documentation § Table design).
const (
	pkRun    = "run#"
	pkRuns   = "runs" // the run list: one entry per run, sort key runListKey
	pkTask   = "task#"
	pkDedup  = "dedup#"
	pkHandle = "handle#"
	pkAgent  = "agent#"

	skRun         = "run"
	skStep        = "step"
	skRunStep     = "step#"        // + seq: the run's steps in creation order
	skVisits      = "visits#"      // + node: the node's visit count
	skLatest      = "latest#"      // + node: the node's last created step and its count of steps
	skDegradation = "degradation#" // + seq
	skAttempt     = "attempt#"     // + n
	skOutput      = "output#"      // + n + "#" + seq
	skFinal       = "final#"       // + n
	skDedup       = "dedup"
	skHandle      = "handle"
	skRenderSize  = "render_size"
)

// seqWidth digits are enough for any attempt number or sequence number
// the store accepts (maxSeq); the padding makes string order numeric order.
const (
	seqWidth = 10
	maxSeq   = 9_999_999_999
)

func pad(n int) string { return fmt.Sprintf("%0*d", seqWidth, n) }

func str(v string) av { return &types.AttributeValueMemberS{Value: v} }

// text is a string attribute value, or a binary one when v is not valid
// UTF-8 (which DynamoDB refuses in a string); nil for "" (the attribute is
// left out).
func text(v string) av {
	switch {
	case v == "":
		return nil
	case utf8.ValidString(v):
		return &types.AttributeValueMemberS{Value: v}
	default:
		return &types.AttributeValueMemberB{Value: []byte(v)}
	}
}

func num(v int64) av { return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)} }

// float is a Number attribute value; nil for nil.
func float(v *float64) av {
	if v == nil {
		return nil
	}
	return &types.AttributeValueMemberN{Value: strconv.FormatFloat(*v, 'f', -1, 64)}
}

// millis is a time as UTC unix milliseconds; nil for the zero time.
func millis(t time.Time) av {
	if t.IsZero() {
		return nil
	}
	return num(t.UnixMilli())
}

// bin is a binary attribute value; nil for an empty slice.
func bin(b []byte) av {
	if len(b) == 0 {
		return nil
	}
	return &types.AttributeValueMemberB{Value: b}
}

func boolean(b bool) av { return &types.AttributeValueMemberBOOL{Value: b} }

// set stores v under name; a nil v leaves the attribute out.
func (it item) set(name string, v av) {
	if v != nil {
		it[name] = v
	}
}

// setAll stores every non-nil value of m.
func (it item) setAll(m map[string]av) item {
	for k, v := range m {
		it.set(k, v)
	}
	return it
}

// str reads a string attribute written by str or text; "" when absent.
func (it item) str(name string) string {
	switch v := it[name].(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberB:
		return string(v.Value)
	}
	return ""
}

// int reads a Number attribute; 0 when absent. A malformed number (never
// written by this package) reads as 0 too, and decode reports it.
func (it item) int(name string) int64 {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(v.Value, 10, 64)
	return n
}

func (it item) float(name string) *float64 {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return nil
	}
	f, err := strconv.ParseFloat(v.Value, 64)
	if err != nil {
		return nil
	}
	return &f
}

func (it item) bytes(name string) []byte {
	if v, ok := it[name].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

func (it item) bool(name string) bool {
	v, ok := it[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

// time reads a time written by millis: UTC, the zero time when absent.
func (it item) time(name string) time.Time {
	if _, ok := it[name]; !ok {
		return time.Time{}
	}
	return time.UnixMilli(it.int(name)).UTC()
}

func quote(s string) string { return strconv.Quote(s) }

// stored returns t as it reads back: UTC, truncated to the millisecond.
func stored(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}
