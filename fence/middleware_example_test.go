package fence_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/fencepost/fencepost/fence"
)

// A net/http service fences its writes: the lease holder's newest epoch
// passes, the replaced owner's delayed write is rejected with 409.
func ExampleMiddleware() {
	store, err := fence.NewMemStore(fence.MemStoreConfig{})
	if err != nil {
		panic(err)
	}
	mw, err := fence.NewMiddleware(fence.MiddlewareConfig{Config: fence.Config{Store: store}})
	if err != nil {
		panic(err)
	}
	handler := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fw, _ := fence.WriteFromContext(r.Context())
		fmt.Fprintf(w, "order written under epoch %d", fw.Epoch)
	}))

	send := func(epoch, key string) {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"sku":"A1"}`))
		req.Header.Set(fence.HeaderToken, epoch)
		req.Header.Set(fence.HeaderTask, "task-42")
		req.Header.Set(fence.HeaderIdempotencyKey, key)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Header().Get("Content-Type") == fence.ProblemContentType {
			var p fence.Problem
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			fmt.Println(rec.Code, p.Type, "max_seen", p.MaxSeenEpoch)
			return
		}
		replayed := ""
		if rec.Header().Get(fence.HeaderReplayed) == "true" {
			replayed = " (replayed)"
		}
		fmt.Printf("%d %s%s\n", rec.Code, rec.Body.String(), replayed)
	}
	send("7", "order-1") // the owner writes
	send("9", "order-1") // the task was reclaimed; the new owner repeats the step
	send("7", "order-2") // the old owner's next write arrives late
	// Output:
	// 200 order written under epoch 7
	// 200 order written under epoch 7 (replayed)
	// 409 https://fencepost.dev/problems/stale-token max_seen 9
}
