package config

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Why a value could not be decoded into its key. Messages never quote the
// value: it may be a secret written under the wrong key.
var (
	errNotWhole     = errors.New("must be a whole number")
	errOutOfRange   = errors.New("is out of range")
	errNotNumber    = errors.New("must be a number")
	errNumberIsBool = errors.New("must be a number, not true or false")
	errNotBool      = errors.New("must be true or false")
	errNotAString   = errors.New("must be a string; quote it (YAML reads 0123, 0x1F, 1_000, 1e3 and true as other values)")
)

// strictScalars decodes scalars in place of mapstructure's weak typing,
// which read a fraction where a whole number goes as its truncation (0.5
// became 0, and so the key's default), true as 1, "" as 0, an IOP_* value
// "010" as octal 8, and made strings of numbers and booleans that are not
// what the file shows (a token 0123 became "83"). Strings, as every IOP_*
// variable is, are parsed in base 10; numbers go only where numbers go,
// booleans only where booleans go, and a string key takes only a string.
func strictScalars(from, to reflect.Type, data any) (any, error) {
	if data == nil {
		return data, nil
	}
	v := reflect.ValueOf(data)
	fk := from.Kind()
	isNumber := fk >= reflect.Int && fk <= reflect.Float64 // ints, uints, floats
	switch to.Kind() {
	case reflect.Int, reflect.Int64:
		switch {
		case fk == reflect.String:
			n, err := strconv.ParseInt(strings.TrimSpace(v.String()), 10, 64)
			if errors.Is(err, strconv.ErrRange) {
				return nil, errOutOfRange
			} else if err != nil {
				return nil, errNotWhole
			}
			return n, nil
		case fk == reflect.Float32 || fk == reflect.Float64:
			f := v.Float()
			if f != math.Trunc(f) { // a fraction, NaN
				return nil, errNotWhole
			}
			if f >= 1<<63 || f < -(1<<63) { // ±Inf too
				return nil, errOutOfRange
			}
			return int64(f), nil
		case fk >= reflect.Uint && fk <= reflect.Uint64:
			// YAML reads a whole number beyond int64 as a uint64, which
			// would wrap to a negative one.
			if v.Uint() > math.MaxInt64 {
				return nil, errOutOfRange
			}
		case fk == reflect.Bool:
			return nil, errNumberIsBool
		}
	case reflect.Float64:
		switch fk {
		case reflect.String:
			f, err := strconv.ParseFloat(strings.TrimSpace(v.String()), 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, errNotNumber
			}
			return f, nil // ±Inf beyond range: each key's bound refuses it
		case reflect.Bool:
			return nil, errNumberIsBool
		}
	case reflect.Bool:
		switch {
		case fk == reflect.String:
			b, err := strconv.ParseBool(strings.TrimSpace(v.String()))
			if err != nil {
				return nil, errNotBool
			}
			return b, nil
		case isNumber:
			return nil, errNotBool
		}
	case reflect.String:
		if isNumber || fk == reflect.Bool {
			return nil, errNotAString
		}
	}
	return data, nil
}
