package loadwatcher

import (
	"bytes"
	"encoding/json"
	"mime"
	"strconv"
	"strings"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// acceptsLoad says whether an Accept header asks for Berth's typed form (loadapi.LoadMediaType
// listed with a quality above 0). Clients that do not name it (upstream Trimaran, paypal's
// client, curl) keep getting the upstream document.
func acceptsLoad(header string) bool {
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != loadapi.LoadMediaType {
			continue
		}
		if q, ok := params["q"]; ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// encodeLoad encodes a typed document.
func encodeLoad(b *LoadDoc) (*doc, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(&b.Load); err != nil {
		return nil, err
	}
	d := newDoc(buf.Bytes())
	d.contentType = loadapi.LoadMediaType
	d.gen, d.nextFlip = b.Gen, b.NextFlip
	return d, nil
}
