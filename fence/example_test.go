package fence_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/fencepost/fencepost/fence"
)

// ExampleMiddleware fences a net/http handler: the write with epoch 17 is
// accepted, then an old owner's write with epoch 16 is rejected as stale.
func ExampleMiddleware() {
	store, _ := fence.NewMemStore(fence.MemStoreConfig{})
	mw, _ := fence.NewMiddleware(fence.MiddlewareConfig{Config: fence.Config{Store: store}})
	charges := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	h := mw.Wrap(charges)

	for _, epoch := range []string{"17", "16"} {
		req := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set(fence.HeaderToken, epoch)
		req.Header.Set(fence.HeaderTask, "run_456")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(epoch, rec.Code)
	}
	// Output:
	// 17 201
	// 16 409
}
