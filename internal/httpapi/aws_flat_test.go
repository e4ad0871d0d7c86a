package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/benchfig"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker"
)

// itemsRead counts the items DynamoDB reads return to the store — a
// GetItem's item, the items a Query evaluated (ScannedCount), a
// BatchGetItem's responses — and, for each read of more than big items,
// the worker functions it was made from (the call chain inside
// internal/worker), so a test can name the call that reads a whole run (a
// ListSteps shows as its Query: its BatchGetItems ask for at most 100 items
// each).
type itemsRead struct {
	mu    sync.Mutex
	n     int64
	big   int
	calls map[string]int64 // call chain → items read by reads of more than big items
}

func (c *itemsRead) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountItemsRead",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			var n int64
			switch r := out.Result.(type) {
			case *awsddb.GetItemOutput:
				if len(r.Item) > 0 {
					n = 1
				}
			case *awsddb.QueryOutput:
				n = int64(r.ScannedCount)
			case *awsddb.BatchGetItemOutput:
				for _, items := range r.Responses {
					n += int64(len(items))
				}
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.n += n
			if c.big > 0 && n > int64(c.big) {
				if c.calls == nil {
					c.calls = map[string]int64{}
				}
				c.calls[middleware.GetOperationName(ctx)+" from "+workerCallers()] += n
			}
			return out, md, err
		}), middleware.After)
}

// take returns the items counted since the last take, and the big reads'
// call chains, and starts again.
func (c *itemsRead) take() (int64, map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, calls := c.n, c.calls
	c.n, c.calls = 0, nil
	return n, calls
}

// workerCallers is the chain of internal/worker and store functions on the
// stack, innermost first, as file:line.
func workerCallers() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var chain []string
	for {
		f, more := frames.Next()
		if i := strings.Index(f.File, "/internal/"); i >= 0 && !strings.HasSuffix(f.File, "_test.go") &&
			(strings.Contains(f.File, "/internal/worker/") || strings.Contains(f.File, "/internal/store/")) {
			chain = append(chain, fmt.Sprintf("%s:%d", f.File[i+1:], f.Line))
		}
		if !more {
			break
		}
	}
	return strings.Join(chain, " < ")
}

// setupAWS is setup on the AWS stores: a DynamoDB table of its own and an
// S3 bucket of its own on the moto server (the S3 sink holds the store's
// blobs and the run's files, as internal/awsapp wires them), the reads
// counted by items. The run has a cost cap, so each dispatch reads its
// spend (docs/architecture.md § The run lifecycle).
func setupAWS(tb testing.TB) (*bundle, *itemsRead) {
	b, c, _ := setupStand(tb)
	return b, c
}

// stand is a bundle's DynamoDB client and table.
type stand struct {
	ddb   *awsddb.Client
	table string
}

// setupStand is setupAWS that also returns the table it made.
func setupStand(tb testing.TB) (*bundle, *itemsRead, stand) {
	tb.Helper()
	cfg := awstest.Moto(tb).Config()
	ctx := context.Background()
	name := "flat" + strings.ToLower(rand.Text()[:10])
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.UsePathStyle = true
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		tb.Fatalf("create bucket %s: %v", name, err)
	}
	sk, err := s3sink.New(s3c, name, "")
	if err != nil {
		tb.Fatal(err)
	}
	c := &itemsRead{}
	ddb := awsddb.NewFromConfig(cfg, func(o *awsddb.Options) { o.APIOptions = append(o.APIOptions, c.register) })
	if err := dynamodb.CreateTables(ctx, ddb, name+"-"); err != nil {
		tb.Fatal(err)
	}
	st, err := dynamodb.New(ddb, dynamodb.Options{Table: dynamodb.TableName(name + "-"), Blobs: sk})
	if err != nil {
		tb.Fatal(err)
	}
	b := setupStore(tb, tb.TempDir(), hitlFlow(tb), func(r *stratus.Run) { r.MaxCostUSD = 1e6 }, st, sk)
	return b, c, stand{ddb, dynamodb.TableName(name + "-")}
}

// floorStep is the floor of dispatch-flat-aws: what any durable step must
// ask of DynamoDB, one transaction writing a step item and an attempt item
// of a partition of their own and one strongly consistent read of one of
// them, on the stand's table. It returns how long they took. On the moto
// stand-in a transaction copies the whole table first (moto 5.2.1's
// transact_write_items deep-copies each table it names, to roll back), so
// this grows with the table where DynamoDB's would not.
func (s stand) floorStep(tb testing.TB, n int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	pk := fmt.Sprintf("floor#%d", n)
	put := func(sk string) ddbtypes.TransactWriteItem {
		return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(s.table),
			Item: map[string]ddbtypes.AttributeValue{dynamodb.PartitionKey: &ddbtypes.AttributeValueMemberS{Value: pk},
				dynamodb.SortKey: &ddbtypes.AttributeValueMemberS{Value: sk}, "status": &ddbtypes.AttributeValueMemberS{Value: "running"}},
			ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": dynamodb.PartitionKey}}}
	}
	start := time.Now()
	if _, err := s.ddb.TransactWriteItems(ctx, &awsddb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{put("step"), put("attempt#1")}}); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.ddb.GetItem(ctx, &awsddb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{dynamodb.PartitionKey: &ddbtypes.AttributeValueMemberS{Value: pk}, dynamodb.SortKey: &ddbtypes.AttributeValueMemberS{Value: "step"}}}); err != nil {
		tb.Fatal(err)
	}
	return time.Since(start)
}

// growTo writes the run's steps up to step n-1 through the store, as
// dispatch and submit would leave them — the flow's four agents in turn,
// each visit completed with one submitted, priced attempt — without the
// worker service's other requests, so a long run is cheap to build.
func (b *bundle) growTo(tb testing.TB, n int) {
	tb.Helper()
	ctx := context.Background()
	st := b.svc.Store
	nodes := []string{"planning", "implementation", "review", "fixing"}
	for i := 1; i < n; i++ {
		node := nodes[(i-1)%len(nodes)]
		step, _, err := st.CreateNextStep(ctx, b.run.ID, node, fmt.Sprintf("grow-%s-%d", b.run.ID, i), func(v int) (stratus.Step, error) {
			return stratus.Step{TID: fmt.Sprintf("%s.%s.%d", b.run.ID, node, v), RunID: b.run.ID, Node: node, Kind: "agent",
				Visit: v, StepRef: fmt.Sprintf("%s#%d", node, v), DedupKey: fmt.Sprintf("grow-%s-%d", b.run.ID, i), Status: stratus.StepRunning, CreatedAt: time.Now().UTC()}, nil
		})
		if err != nil {
			tb.Fatalf("step %d: %v", i, err)
		}
		cost := 0.01
		now := time.Now().UTC()
		if err := st.CreateAttempt(ctx, stratus.Attempt{TID: step.TID, N: 1, Agent: node, Status: stratus.AttemptSubmitted,
			PromptTokens: 100, CompletionTokens: 50, CostUSD: &cost, StartedAt: now, EndedAt: now}); err != nil {
			tb.Fatalf("attempt of step %d: %v", i, err)
		}
		step.Value, _ = json.Marshal(worker.StepValue{StepRef: step.StepRef, Node: node, Outcome: "done"})
		step.Status, step.Verdict, step.EndedAt = stratus.StepCompleted, "done", now
		if err := st.UpdateStep(ctx, step); err != nil {
			tb.Fatalf("complete step %d: %v", i, err)
		}
	}
}

// stepAWS is one step of the worker's path: dispatch of the planning node
// (a new visit), the worker's prompt fetch and its submit, through the
// real handler. It returns the items each read and how long the three took.
func (b *bundle) stepAWS(tb testing.TB, c *itemsRead, client *http.Client) (items [3]int64, calls map[string]int64, took time.Duration) {
	tb.Helper()
	c.take()
	all := map[string]int64{}
	keep := func(i int) {
		n, cs := c.take()
		items[i] = n
		for k, v := range cs {
			all[k] += v
		}
	}
	start := time.Now()
	spec := b.dispatchFresh(tb)
	keep(0)
	auth := "Bearer " + spec.Handle
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/v1/worker/prompt?task_id="+spec.TaskID, nil)
	req.Header.Set("Authorization", auth)
	mustOK(tb, client, req)
	keep(1)
	req, _ = http.NewRequest(http.MethodPost, b.srv.URL+"/v1/worker/submit", strings.NewReader("# Plan\n\nDone.\n"))
	req.Header.Set("Authorization", auth)
	mustOK(tb, client, req)
	took = time.Since(start)
	keep(2)
	return items, all, took
}

func mustOK(tb testing.TB, client *http.Client, req *http.Request) {
	tb.Helper()
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, body)
	}
}

func sum(items [3]int64) int64 { return items[0] + items[1] + items[2] }

// On the DynamoDB store a step's dispatch, prompt fetch and submit read
// about as many items at step 200 of a run as at step 5 (README.md §
// Performance: dispatch-flat-aws): what the step reads is O(nodes), not
// O(steps). The run has a cost cap, so dispatch reads its spend.
func TestDispatchFetchSubmit_AWS_ItemsReadFlat(t *testing.T) {
	t.Parallel()
	client := &http.Client{}
	measure := func(n int) ([3]int64, map[string]int64) {
		b, c := setupAWS(t)
		c.big = n / 2
		b.growTo(t, n)
		items, calls, _ := b.stepAWS(t, c, client)
		return items, calls
	}
	early, _ := measure(5)
	late, calls := measure(200)
	t.Logf("items read (dispatch, prompt fetch, submit): step 5 %v = %d, step 200 %v = %d", early, sum(early), late, sum(late))
	checkItemsFlat(t, sum(early), sum(late), calls)
}

// checkItemsFlat fails t when a step at step 200 read more than 1.25× the
// items it read at step 5, naming calls: the reads of more than 100 items
// at step 200, by the call chain that made them.
func checkItemsFlat(t *testing.T, early, late int64, calls map[string]int64) {
	t.Helper()
	if late > early*5/4 {
		var names []string
		for chain, n := range calls {
			names = append(names, fmt.Sprintf("%d items by %s", n, chain))
		}
		t.Errorf("%d items read at step 200, %d at step 5; want at most 1.25× (reads of more than 100 items: %s)", late, early, strings.Join(names, "; "))
	}
}

// BenchmarkFigure_DispatchFlatAWS prints `make bench`'s dispatch-flat-aws
// figures (README.md § Performance): one step's dispatch, prompt fetch and
// submit on the AWS stores (DynamoDB and S3 on the moto stand-in, a run
// with a cost cap) at about step 500 of a run next to the same at about
// step 5 of another run, samples alternating between the two runs (medians
// of 9 each): dispatch-flat-aws is the time the three take, and
// dispatch-flat-aws-items the DynamoDB items they read; goal for both: at
// most 1.25× — a step's cost does not grow with the run. The earlier steps
// are written through the store (growTo). dispatch-flat-aws-floor is the
// same ratio for floorStep, the two tables' own transaction and read: on
// moto it grows with the table, which the stand-in's time ratio inherits.
func BenchmarkFigure_DispatchFlatAWS(b *testing.B) {
	const samples = 9
	early, ec, es := setupStand(b)
	late, lc, ls := setupStand(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	printed := false
	for b.Loop() {
		if printed {
			continue
		}
		early.growTo(b, 5)
		late.growTo(b, 500)
		var earlyT, lateT, earlyN, lateN, earlyF, lateF []float64
		for i := range samples {
			earlyF = append(earlyF, float64(es.floorStep(b, i).Microseconds())/1e3)
			lateF = append(lateF, float64(ls.floorStep(b, i).Microseconds())/1e3)
			items, _, took := early.stepAWS(b, ec, client)
			earlyT, earlyN = append(earlyT, float64(took.Microseconds())/1e3), append(earlyN, float64(sum(items)))
			items, _, took = late.stepAWS(b, lc, client)
			lateT, lateN = append(lateT, float64(took.Microseconds())/1e3), append(lateN, float64(sum(items)))
		}
		benchfig.FromSamples(benchfig.Figure{Name: "dispatch-flat-aws", Unit: "ms/step", Goal: 1.25}, lateT, earlyT).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "dispatch-flat-aws-items", Unit: "items/step", Goal: 1.25}, lateN, earlyN).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "dispatch-flat-aws-floor", Unit: "ms/step", Goal: 1.25}, lateF, earlyF).Print(os.Stdout)
		printed = true
	}
}
