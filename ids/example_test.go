package ids_test

import (
	"fmt"
	"strings"

	"github.com/svcplatform/conventions/ids"
)

var orderIDs = ids.MustPrefix("ord")

func Example() {
	id := orderIDs.New()
	fmt.Println(strings.HasPrefix(id, "ord_"), len(id))
	fmt.Println(orderIDs.Valid(id), orderIDs.Valid("we_"+id[4:]), orderIDs.Valid("sk_live_4eC39HqLyjWDarjtT1zdp7dc"))
	_, err := ids.NewPrefix("Orders")
	fmt.Println(err)
	// Output:
	// true 30
	// true false false
	// ids: prefix "Orders" must be lowercase letters and digits, starting with a letter
}
