//go:build race

package lease

// raceEnabled scales the random tests down under the (much slower) race
// detector; the plain run keeps the full size.
const raceEnabled = true
