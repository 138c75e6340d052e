package openaiapi

// OwnedBy is the owned_by of every model the edge lists: the models are the
// edge's configured aliases, not any upstream's.
const OwnedBy = "iop"

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// ModelsList renders GET /v1/models: {"object":"list","data":[{"id",
// "object":"model","created","owned_by":"iop"}, …]} in the order given (the
// configuration's), with created for every entry (e.g. the config load time).
// No names yield an empty data array, never null.
func ModelsList(names []string, created int64) []byte {
	l := modelList{Object: "list", Data: make([]modelObject, 0, len(names))}
	for _, n := range names {
		l.Data = append(l.Data, modelObject{ID: n, Object: "model", Created: created, OwnedBy: OwnedBy})
	}
	return mustMarshal(l)
}

// ModelObject renders GET /v1/models/{id} for a configured model (answer
// unknown ids with ModelNotFound).
func ModelObject(name string, created int64) []byte {
	return mustMarshal(modelObject{ID: name, Object: "model", Created: created, OwnedBy: OwnedBy})
}
