// The byte bounds of records are kit's, where the gateway reads them too; src/db imports them
// from this path.
export { PAGE_MAX_BYTES, RECORD_MAX_BYTES } from "@rowbase/kit";
