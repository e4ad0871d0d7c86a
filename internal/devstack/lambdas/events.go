package lambdas

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stratusflow/stratus/internal/executor"
)

// Step Functions' EventBridge event of an execution's status change.
const (
	ExecutionStatusChangeSource     = "aws.states"
	ExecutionStatusChangeDetailType = "Step Functions Execution Status Change"
)

// ExecutionStatusChange is the EventBridge event Step Functions sends when
// execution x changes status (as the EventsFunction's rule receives it):
// source aws.states, detail-type "Step Functions Execution Status
// Change", the execution's ARN as the one resource, and a detail of
// executionArn, stateMachineArn, name, status, startDate and stopDate
// (Unix milliseconds; stopDate null while running), input and output as
// JSON text (null when absent), inputDetails/outputDetails, error and
// cause (null unless set). account and region are those of the ARN when
// empty.
func ExecutionStatusChange(x executor.Execution, account, region string) ([]byte, error) {
	if p := strings.Split(x.ARN, ":"); len(p) > 4 {
		if region == "" {
			region = p[3]
		}
		if account == "" {
			account = p[4]
		}
	}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var stop *int64
	if !x.StopDate.IsZero() {
		v := x.StopDate.UnixMilli()
		stop = &v
	}
	detail := map[string]any{
		"executionArn":    x.ARN,
		"stateMachineArn": x.StateMachine,
		"name":            x.Name,
		"status":          x.Status,
		"startDate":       x.StartDate.UnixMilli(),
		"stopDate":        stop,
		"input":           str(string(x.Input)),
		"output":          str(string(x.Output)),
		"inputDetails":    map[string]bool{"included": true},
		"outputDetails":   map[string]bool{"included": true},
		"error":           str(x.Error),
		"cause":           str(x.Cause),
	}
	if x.Output == nil {
		detail["outputDetails"] = nil
	}
	d, err := json.Marshal(detail)
	if err != nil {
		return nil, err
	}
	at := x.StopDate
	if at.IsZero() {
		at = time.Now()
	}
	return json.Marshal(events.CloudWatchEvent{
		Version:    "0",
		ID:         newRequestID(),
		DetailType: ExecutionStatusChangeDetailType,
		Source:     ExecutionStatusChangeSource,
		AccountID:  account,
		Time:       at.UTC().Truncate(time.Second),
		Region:     region,
		Resources:  []string{x.ARN},
		Detail:     d,
	})
}

// S3's EventBridge event of an object written (a bucket with
// NotificationConfiguration.EventBridgeConfiguration.EventBridgeEnabled),
// and EventBridge's event of a schedule's tick.
const (
	ObjectCreatedSource       = "aws.s3"
	ObjectCreatedDetailType   = "Object Created"
	ScheduledEventSource      = "aws.events"
	ScheduledEventDetailType  = "Scheduled Event"
	standInAccount            = "123456789012" // moto's account
	objectCreatedReasonPutObj = "PutObject"
)

// ObjectCreated is the EventBridge event S3 sends when an object is
// written to bucket (Amazon S3 User Guide, "EventBridge event message
// structure"), as a function's EventBridgeRule event delivers it: source
// aws.s3, detail-type "Object Created", the bucket's ARN as the one
// resource, and a detail of version "0", bucket.name, object.key,
// object.size (bytes), object.etag (without S3's quotes), the request's
// id, requester (the account) and reason "PutObject". The account is the
// stand-in's (moto's 123456789012).
func ObjectCreated(bucket, key, etag string, size int64, region string) ([]byte, error) {
	detail := map[string]any{
		"version": "0",
		"bucket":  map[string]string{"name": bucket},
		"object": map[string]any{
			"key":  key,
			"size": size,
			"etag": strings.Trim(etag, `"`),
		},
		"request-id": newRequestID(),
		"requester":  standInAccount,
		"reason":     objectCreatedReasonPutObj,
	}
	d, err := json.Marshal(detail)
	if err != nil {
		return nil, err
	}
	return json.Marshal(events.CloudWatchEvent{
		Version:    "0",
		ID:         newRequestID(),
		DetailType: ObjectCreatedDetailType,
		Source:     ObjectCreatedSource,
		AccountID:  standInAccount,
		Time:       time.Now().UTC().Truncate(time.Second),
		Region:     region,
		Resources:  []string{"arn:aws:s3:::" + bucket},
		Detail:     d,
	})
}

// ScheduledEvent is the event EventBridge delivers on each tick of a
// schedule rule (a function's Schedule event): source aws.events,
// detail-type "Scheduled Event", the rule's ARN as the one resource and an
// empty detail ({}). The account is the stand-in's.
func ScheduledEvent(ruleARN, region string) ([]byte, error) {
	return json.Marshal(events.CloudWatchEvent{
		Version:    "0",
		ID:         newRequestID(),
		DetailType: ScheduledEventDetailType,
		Source:     ScheduledEventSource,
		AccountID:  standInAccount,
		Time:       time.Now().UTC().Truncate(time.Second),
		Region:     region,
		Resources:  []string{ruleARN},
		Detail:     json.RawMessage(`{}`),
	})
}
