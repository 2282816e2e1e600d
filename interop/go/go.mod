// Go module of the Synapse interop client: the program in this directory
// and the code that buf generates from proto/ into gen/ (not committed).
module synapse-interop

go 1.26
