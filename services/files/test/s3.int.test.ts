import { filesSuite } from "./suite.js";

filesSuite("s3");
